/**
 * What every import path (the native workflow routes, RAGFlow's `POST/PUT /api/v1/agents`)
 * does to a DSL before it is compiled and stored (lib/tools/dsl-tools.ts):
 *
 * - with `dropUnsupportedTools`, the tool entries of kinds the Agent does not offer are left
 *   out (Bing, DuckDuckGo, ...), each reported;
 * - every credential a tool entry or tool component carries is taken out of the DSL: a value is
 *   moved into the tenant's secrets under the kind's secret name (`TAVILY_API_KEY`, or
 *   `TAVILY_API_KEY_2` when the tenant holds another value there) and replaced by its
 *   reference; an empty or placeholder value ("YOUR_API_KEY ...") becomes a reference to the
 *   kind's secret, with a warning when the tenant has not set it.
 *
 * Nothing is written until `commit()`, which the route calls once every check has passed, so a
 * refused import writes nothing.
 */
import { agentToolRegistry } from '../components/agent';
import { sealToolCredentials } from '../secrets/tool-credentials';
import { dropUnsupportedTools, type FoundCredential } from '../tools/dsl-tools';
import type { AppDeps } from './app';
import type { ImportWarning } from './knowledge-warnings';

export interface ImportOptions {
  /** Leave out tool entries Easel does not offer instead of refusing the DSL. */
  dropUnsupportedTools?: boolean;
  /** Compiles the prepared DSL, throwing the dialect's error when it is refused. */
  compile(dsl: Record<string, unknown>): void;
}

export interface PreparedImport {
  /** The DSL to store: no credential left in it. */
  dsl: Record<string, unknown>;
  warnings: ImportWarning[];
  /** Writes the moved credentials into the tenant's secrets: call it once the import is sure to be stored. */
  commit(): Promise<void>;
}

export async function prepareImport(deps: Pick<AppDeps, 'engine' | 'secrets'>, tenant: string, dsl: Record<string, unknown>, options: ImportOptions): Promise<PreparedImport> {
  const tools = agentToolRegistry(deps.engine.registry);
  const warnings: ImportWarning[] = [];
  let current = dsl;
  if (options.dropUnsupportedTools) {
    const supported = (kind: string) => tools?.kind(kind) !== undefined;
    const result = dropUnsupportedTools(current, supported);
    current = result.dsl;
    for (const d of result.dropped) {
      warnings.push({
        code: 'tool_dropped',
        component_id: d.component_id,
        field: d.field,
        kind: d.kind,
        message: `${d.component_id}: the tool ${d.kind} ("${d.name}") was left out: ${d.reason}.`,
      });
    }
  }

  const sealed = await sealToolCredentials(deps.secrets, tenant, current, (kind) => tools?.kind(kind)?.credentials);
  options.compile(sealed.dsl);
  for (const c of sealed.credentials) warnings.push(...(await credentialWarning(c, sealed.isSet)));
  return { dsl: sealed.dsl, warnings, commit: sealed.commit };
}

async function credentialWarning(c: FoundCredential, isSet: (name: string) => Promise<boolean>): Promise<ImportWarning[]> {
  const at = { component_id: c.component_id, field: c.field, kind: c.kind, secret: c.reference as string };
  if (c.found === 'value') {
    return [{ code: 'credential_moved', ...at, message: `${c.component_id} ${c.field}: the credential was moved into the tenant secret ${c.reference}; the DSL names {secret.${c.reference}}.` }];
  }
  if (await isSet(c.reference as string)) return [];
  const was = c.found === 'placeholder' ? 'held a placeholder, now' : c.found === 'empty' ? 'was empty, now' : '';
  return [{
    code: 'credential_unset',
    ...at,
    message: `${c.component_id} ${c.field} ${was ? `${was} ` : ''}names the tenant secret ${c.reference}, which is not set: set it (PUT /workflows/v1/secrets/${c.reference}) before a run reaches ${c.kind}.`,
  }];
}
