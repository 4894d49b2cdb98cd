/**
 * The knowledge bases a DSL names statically: the `dataset_ids` (or, when those are empty, the
 * older `kb_ids`, as RAGFlow's Retrieval reads them) of every Retrieval component and of every
 * Retrieval tool of an Agent, sub-Agents' tools included. References (`begin@kb`, `{sys.x}`)
 * are resolved when the run comes and are left out. Imports use it to warn about ids that name
 * none of the tenant's knowledge bases; nothing here refuses a DSL.
 *
 * @example
 *   knowledgeRefsOf(dsl); // ['a5aaec4a819b11f095f1047c16ec874f', 'Product manuals']
 */
import { isRecord } from '../canvas/references';

export interface ComponentKnowledgeRefs {
  /** The component in `components` (an Agent for the Retrieval tools it, or its sub-Agents, carry). */
  component_id: string;
  /** Ids or names, in DSL order, each once. */
  ids: string[];
}

const RETRIEVAL = 'Retrieval';
const AGENT = 'Agent';

/** Every static id or name, in DSL order, each once. */
export function knowledgeRefsOf(dsl: unknown): string[] {
  return unique(knowledgeRefsByComponent(dsl).flatMap((r) => r.ids));
}

/** The static ids or names per component that has any, in the order of `components`. */
export function knowledgeRefsByComponent(dsl: unknown): ComponentKnowledgeRefs[] {
  const components = isRecord(dsl) && isRecord(dsl.components) ? dsl.components : {};
  const found: ComponentKnowledgeRefs[] = [];
  for (const [componentId, node] of Object.entries(components)) {
    const obj = isRecord(node) && isRecord(node.obj) ? node.obj : undefined;
    if (!obj) continue;
    const ids = unique(refsOfEntry(obj.component_name, obj.params, 0));
    if (ids.length > 0) found.push({ component_id: componentId, ids });
  }
  return found;
}

/** Sub-Agents nest; past this depth an entry is not one a canvas could run anyway. */
const MAX_NESTING = 16;

function refsOfEntry(name: unknown, params: unknown, depth: number): string[] {
  if (!isRecord(params) || depth > MAX_NESTING) return [];
  if (name === RETRIEVAL) return staticIds(params);
  if (name !== AGENT || !Array.isArray(params.tools)) return [];
  return params.tools.flatMap((tool) => (isRecord(tool) ? refsOfEntry(tool.component_name, tool.params, depth + 1) : []));
}

/** RAGFlow's rule: `dataset_ids` when it has any, else `kb_ids`; a text counts as one id. */
function staticIds(params: Record<string, unknown>): string[] {
  const listOf = (value: unknown): string[] => (typeof value === 'string' ? [value] : Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);
  const datasetIds = listOf(params.dataset_ids).filter((id) => id.trim() !== '');
  const ids = datasetIds.length > 0 ? datasetIds : listOf(params.kb_ids);
  return ids.map((id) => id.trim()).filter((id) => id !== '' && !isReference(id));
}

/** `cpn@output`, `{sys.query}`: resolved at run time, not at import. */
function isReference(id: string): boolean {
  return id.includes('@') || id.includes('{');
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
