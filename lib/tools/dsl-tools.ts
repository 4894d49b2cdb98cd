/**
 * What an import does to the tools a DSL declares, before it is compiled and stored: it may
 * leave out the tool entries of kinds Easel does not offer (`dropUnsupportedTools`), and it
 * takes every credential out of the DSL (`extractCredentials`) — a value is to be moved into
 * the tenant's secrets and replaced by its reference, an empty or placeholder one becomes a
 * reference to the kind's default secret. Both are pure: the caller compiles the result, writes
 * the secrets and reports what was done.
 *
 * Tools sit in an Agent's `params.tools` (sub-Agents' too, nested), and tool kinds may also sit
 * on the canvas as components; RAGFlow's editor keeps a copy of each component's params in its
 * graph node (`graph.nodes[].data.form`), which is rewritten the same way.
 */
import { isRecord } from '../canvas/references';
import { SECRET_REFERENCE } from './params';
import { refusalOf } from './refused';
import type { ToolCredential } from './registry';

/** One tool entry left out of an Agent. */
export interface DroppedTool {
  /** The Agent in `components` (the outermost, for an entry of a sub-Agent). */
  component_id: string;
  /** Where, as compile errors name fields: `obj.params.tools.1`, `obj.params.tools.0.params.tools.2`. */
  field: string;
  kind: string;
  name: string;
  reason: string;
}

/** A credential found in the DSL. */
export interface FoundCredential {
  component_id: string;
  field: string;
  kind: string;
  /** The kind's default secret (`TAVILY_API_KEY`). */
  secret: string;
  /** `value`: a real one, to move; `placeholder`/`empty`: replaced by `{secret.<secret>}`; `reference`: kept. */
  found: 'value' | 'placeholder' | 'empty' | 'reference';
  /** The secret the DSL now names. For `value`, decided by the caller (`assign`). */
  reference?: string;
}

export interface CredentialPlan {
  /** The DSL with placeholders and empty credentials as references; values still in place. */
  dsl: Record<string, unknown>;
  credentials: FoundCredential[];
  /** The value a `value` credential holds. */
  valueOf(credential: FoundCredential): string | undefined;
  /**
   * Replaces each value with `{secret.NAME}`, `NAME` chosen per value by `nameFor` (the same
   * value gets the same name); every other copy of the value in the DSL is replaced too.
   */
  assign(nameFor: (credential: FoundCredential, value: string) => string): { dsl: Record<string, unknown>; moves: { name: string; value: string }[] };
}

const AGENT = 'Agent';
/** Bounds the walk: sub-Agents nest at most a few levels (MAX_AGENT_DEPTH). */
const MAX_DEPTH = 8;

/**
 * Placeholders stock templates and docs ship instead of a key ("YOUR_API_KEY (obtained from
 * ...)", "<api key>", "xxxx", "sk-xxxxxxxx"): a real credential has no spaces and says nothing
 * of being one.
 */
export function isPlaceholderCredential(value: string): boolean {
  const v = value.trim();
  return /\s/.test(v) || /^[<[{(]/.test(v) || /^your[-_]/i.test(v) || /^[x*.•_-]+$/i.test(v) || /^[a-z]{2,5}-[x*]{4,}$/i.test(v) || /^(api[-_]?key|token|password|secret|changeme)$/i.test(v);
}

/** The DSL without tool entries whose kind `supported` rejects, and what was left out. */
export function dropUnsupportedTools(dsl: Record<string, unknown>, supported: (kind: string) => boolean): { dsl: Record<string, unknown>; dropped: DroppedTool[] } {
  const copy = structuredClone(dsl);
  const dropped: DroppedTool[] = [];
  forEachComponent(copy, (componentId, obj, forms) => {
    if (obj.component_name !== AGENT) return;
    const drop = (params: unknown, at: string, record: boolean, depth: number) => {
      if (!isRecord(params) || !Array.isArray(params.tools) || depth > MAX_DEPTH) return;
      const kept: unknown[] = [];
      params.tools.forEach((entry, i) => {
        const kind = isRecord(entry) && typeof entry.component_name === 'string' ? entry.component_name : undefined;
        if (kind !== undefined && kind !== AGENT && !supported(kind)) {
          if (record) {
            const name = isRecord(entry) && typeof entry.name === 'string' ? entry.name : kind;
            dropped.push({ component_id: componentId, field: `${at}.tools.${i}`, kind, name, reason: refusalOf(kind) ?? 'Easel does not offer this tool' });
          }
          return;
        }
        if (isRecord(entry) && kind === AGENT) drop(entry.params, `${at}.tools.${i}.params`, record, depth + 1);
        kept.push(entry);
      });
      params.tools = kept;
    };
    drop(obj.params, 'obj.params', true, 0);
    for (const form of forms) drop(form, 'graph.data.form', false, 0);
  });
  return { dsl: copy, dropped };
}

/**
 * The credentials of every tool entry and tool component whose kind declares them
 * (`credentialsOf(kind)`), with placeholders and empty ones already replaced by references.
 */
export function extractCredentials(dsl: Record<string, unknown>, credentialsOf: (kind: string) => readonly ToolCredential[] | undefined): CredentialPlan {
  const copy = structuredClone(dsl);
  const found: FoundCredential[] = [];
  /** Where each value sits, to replace it once its name is chosen. */
  const holders: { holder: Record<string, unknown>; param: string; credential: FoundCredential }[] = [];
  const visit = (componentId: string, kind: unknown, params: unknown, at: string, record: boolean, depth: number) => {
    if (!isRecord(params) || typeof kind !== 'string' || depth > MAX_DEPTH) return;
    for (const credential of credentialsOf(kind) ?? []) {
      const raw = params[credential.param];
      const value = typeof raw === 'string' ? raw.trim() : raw === undefined || raw === null ? '' : undefined;
      if (value === undefined) continue; // not a string: the compiler names it
      const state: FoundCredential['found'] = value === '' ? 'empty' : SECRET_REFERENCE.test(value) ? 'reference' : isPlaceholderCredential(value) ? 'placeholder' : 'value';
      const field = `${at}.${credential.param}`;
      const entry: FoundCredential = { component_id: componentId, field, kind, secret: credential.secret, found: state };
      if (state === 'empty' || state === 'placeholder') {
        entry.reference = credential.secret;
        params[credential.param] = `{secret.${credential.secret}}`;
      } else if (state === 'reference') {
        entry.reference = SECRET_REFERENCE.exec(value)?.[1] as string;
      }
      if (record) found.push(entry);
      if (state === 'value') holders.push({ holder: params, param: credential.param, credential: entry });
    }
    if (kind === AGENT && Array.isArray(params.tools)) {
      params.tools.forEach((tool, i) => {
        if (isRecord(tool)) visit(componentId, tool.component_name, tool.params, `${at}.tools.${i}.params`, record, depth + 1);
      });
    }
  };
  forEachComponent(copy, (componentId, obj, forms) => {
    visit(componentId, obj.component_name, obj.params, 'obj.params', true, 0);
    for (const form of forms) visit(componentId, obj.component_name, form, 'graph.data.form', false, 0);
  });
  return {
    dsl: copy,
    credentials: found,
    valueOf: (credential) => {
      const at = holders.find((h) => h.credential === credential);
      return at ? String(at.holder[at.param]).trim() : undefined;
    },
    assign(nameFor) {
      const byValue = new Map<string, string>();
      for (const { holder, param, credential } of holders) {
        const value = String(holder[param]).trim();
        let name = byValue.get(value);
        if (name === undefined) {
          name = nameFor(credential, value);
          byValue.set(value, name);
        }
        credential.reference = name;
      }
      // every copy of a value (the graph's, one pasted elsewhere) becomes its reference
      const result = replaceStrings(copy, (s) => {
        const name = byValue.get(s.trim());
        return name === undefined ? s : `{secret.${name}}`;
      }) as Record<string, unknown>;
      return { dsl: result, moves: [...byValue].map(([value, name]) => ({ name, value })) };
    },
  };
}

/** Each component's `obj`, with the graph's form copies of its params. */
function forEachComponent(dsl: Record<string, unknown>, fn: (componentId: string, obj: Record<string, unknown>, forms: Record<string, unknown>[]) => void): void {
  const components = isRecord(dsl.components) ? dsl.components : {};
  const nodes = isRecord(dsl.graph) && Array.isArray(dsl.graph.nodes) ? dsl.graph.nodes : [];
  for (const [componentId, node] of Object.entries(components)) {
    const obj = isRecord(node) && isRecord(node.obj) ? node.obj : undefined;
    if (!obj) continue;
    const forms = nodes.flatMap((n) => (isRecord(n) && n.id === componentId && isRecord(n.data) && isRecord(n.data.form) ? [n.data.form] : []));
    fn(componentId, obj, forms);
  }
}

function replaceStrings(value: unknown, replace: (s: string) => string, depth = 0): unknown {
  if (typeof value === 'string') return replace(value);
  if (depth > 64) return value;
  if (Array.isArray(value)) return value.map((v) => replaceStrings(v, replace, depth + 1));
  if (isRecord(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceStrings(v, replace, depth + 1)]));
  return value;
}
