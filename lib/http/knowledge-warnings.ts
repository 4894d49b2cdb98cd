/**
 * Warnings of an import (a workflow, a version, a RAGFlow agent): the knowledge bases its
 * Retrieval components and Retrieval tools name that none of the tenant's knowledge bases is
 * (by id, alias or name). Never a refusal: a template's dataset ids are another server's until
 * the tenant creates (or aliases) its own. Another tenant's knowledge base is as unknown as a
 * missing one, so both read the same, byte for byte.
 */
import { knowledgeRefsByComponent } from '../knowledge/dsl-refs';
import type { AppDeps } from './app';

/**
 * What an import stored but may not work as written, or changed on the way in (lib/http/
 * dsl-import.ts): knowledge bases the tenant does not have, tool entries left out, credentials
 * moved into the tenant's secrets, secrets a tool needs that are not set.
 */
export interface ImportWarning {
  code: 'unknown_knowledge_base' | 'tool_dropped' | 'credential_moved' | 'credential_unset';
  component_id: string;
  message: string;
  /** unknown_knowledge_base: the ids or names. */
  ids?: string[];
  /** Where in the component (`obj.params.tools.0.params.api_key`). */
  field?: string;
  /** The tool kind. */
  kind?: string;
  /** The tenant secret the DSL now names. */
  secret?: string;
}

export async function knowledgeWarnings(deps: AppDeps, tenant: string, dsl: unknown): Promise<ImportWarning[]> {
  const refs = knowledgeRefsByComponent(dsl);
  if (refs.length === 0) return [];
  let missing = new Set(refs.flatMap((r) => r.ids));
  if (deps.knowledge) {
    try {
      missing = new Set((await deps.knowledge.forTenant(tenant).resolve([...missing])).missing);
    } catch (error) {
      // the import is stored either way; a check that could not be made warns of nothing
      deps.logger?.error('knowledge references not checked', { error: error instanceof Error ? error.message : String(error) });
      return [];
    }
  }
  return refs.flatMap(({ component_id, ids }) => {
    const unknown = ids.filter((id) => missing.has(id));
    if (unknown.length === 0) return [];
    const one = unknown.length === 1;
    return [{
      code: 'unknown_knowledge_base' as const,
      component_id,
      ids: unknown,
      message: `${component_id} names ${one ? 'a knowledge base' : 'knowledge bases'} this tenant does not have: ${unknown.join(', ')}. The workflow is stored; a run fails there until ${one ? 'it' : 'each'} is the id, name or alias of one of the tenant's knowledge bases.`,
    }];
  });
}

/** The warnings as one line of text (RAGFlow's envelope carries them in `message`). */
export function warningText(warnings: readonly ImportWarning[]): string | undefined {
  return warnings.length === 0 ? undefined : warnings.map((w) => `Warning: ${w.message}`).join(' ');
}
