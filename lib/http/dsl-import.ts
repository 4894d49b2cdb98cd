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
import { EaselError } from '../errors';
import { dropUnsupportedTools, extractCredentials, type FoundCredential } from '../tools/dsl-tools';
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

/** How many numbered names (`_2` ... ) a kind's secret may take before the import gives up. */
const MAX_SECRET_SUFFIX = 50;

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

  const plan = extractCredentials(current, (kind) => tools?.kind(kind)?.credentials);
  if (plan.credentials.length === 0) {
    options.compile(current);
    return { dsl: current, warnings, commit: async () => {} };
  }
  const secrets = deps.secrets;
  const held = new Map<string, string | undefined>();
  const valueOf = async (name: string) => {
    if (!held.has(name)) held.set(name, secrets ? await secrets.get(tenant, name) : undefined);
    return held.get(name);
  };
  // names for the values, decided before anything is written
  const chosen = new Map<string, string>();
  for (const c of plan.credentials.filter((c) => c.found === 'value')) {
    if (!secrets) throw new EaselError('unavailable', 'tenant secrets are not configured on this server: a credential in the DSL cannot be moved out of it');
    const value = valueAt(plan.dsl, c.field, c.component_id);
    if (value === undefined || chosen.has(value)) continue;
    chosen.set(value, await freeName(c.secret, value, valueOf, new Set(chosen.values())));
  }
  const { dsl: sealed, moves } = plan.assign((_c, value) => chosen.get(value) as string);
  options.compile(sealed);

  const writes: { name: string; value: string }[] = [];
  for (const { name, value } of moves) {
    if ((await valueOf(name)) !== value) writes.push({ name, value });
    held.set(name, value);
  }
  for (const c of plan.credentials) warnings.push(...(await credentialWarning(c, valueOf)));
  return {
    dsl: sealed,
    warnings,
    async commit() {
      for (const { name, value } of writes) await secrets?.put(tenant, name, value);
    },
  };
}

/** `base` if the tenant has not set it (or holds this value there), else `base_2`, `base_3`, ... */
async function freeName(base: string, value: string, valueOf: (name: string) => Promise<string | undefined>, taken: ReadonlySet<string>): Promise<string> {
  for (let n = 1; n <= MAX_SECRET_SUFFIX; n++) {
    const name = n === 1 ? base : `${base}_${n}`.slice(0, 64);
    if (taken.has(name)) continue;
    const held = await valueOf(name);
    if (held === undefined || held === value) return name;
  }
  throw new EaselError('invalid_request', `the tenant already holds ${MAX_SECRET_SUFFIX} different values under ${base}: store this credential as a secret yourself and write {secret.NAME}`);
}

async function credentialWarning(c: FoundCredential, valueOf: (name: string) => Promise<string | undefined>): Promise<ImportWarning[]> {
  const at = { component_id: c.component_id, field: c.field, kind: c.kind, secret: c.reference as string };
  if (c.found === 'value') {
    return [{ code: 'credential_moved', ...at, message: `${c.component_id} ${c.field}: the credential was moved into the tenant secret ${c.reference}; the DSL names {secret.${c.reference}}.` }];
  }
  if ((await valueOf(c.reference as string)) !== undefined) return [];
  const was = c.found === 'placeholder' ? 'held a placeholder, now' : c.found === 'empty' ? 'was empty, now' : '';
  return [{
    code: 'credential_unset',
    ...at,
    message: `${c.component_id} ${c.field} ${was ? `${was} ` : ''}names the tenant secret ${c.reference}, which is not set: set it (PUT /workflows/v1/secrets/${c.reference}) before a run reaches ${c.kind}.`,
  }];
}

/** The string at a credential's field (`obj.params.tools.0.params.api_key`) of a component. */
function valueAt(dsl: Record<string, unknown>, field: string, componentId: string): string | undefined {
  let node: unknown = (dsl.components as Record<string, unknown> | undefined)?.[componentId];
  for (const part of field.split('.')) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return typeof node === 'string' ? node.trim() : undefined;
}
