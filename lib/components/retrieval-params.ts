/**
 * RAGFlow's `RetrievalParam`, shared by the Retrieval component and the Retrieval tool of
 * Agents: every param it has, with its defaults and checks. Params Easel cannot honour are
 * refused when the DSL is loaded — each by name, all in one DslValidationError — when they
 * carry anything but their default: `use_kg`, `rerank_id`, `cross_languages`, `toc_enhance`,
 * a metadata filter (`meta_data_filter` with a method), and RAGFlow's memory
 * (`retrieval_from: "memory"`, `memory_ids`).
 */
import { z } from 'zod';
import type { CheckScope } from '../canvas/component';
import type { DslProblem } from '../canvas/errors';
import { asReference, exactReference, isRecord } from '../canvas/references';

const numeric = z.lazy(() => z.union([z.number(), z.string().regex(/^\s*-?\d*\.?\d+\s*$/).transform(Number)]));

/** A number between 0 and 1, as RAGFlow's `check_decimal_float`. */
const fraction = (fallback: number) =>
  numeric
    .nullish()
    .transform((v) => v ?? fallback)
    .pipe(z.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1'));

const count = (fallback: number, max: number) =>
  numeric
    .nullish()
    .transform((v) => v ?? fallback)
    .pipe(z.number().int('must be a whole number').positive('must be a positive number').max(max, `must be at most ${max}`));

/** A list of ids, names or variable references; RAGFlow's older DSLs write one as a string. */
const idList = z.lazy(() => z
  .union([z.string(), z.array(z.unknown())])
  .nullish()
  .transform((v) => {
    if (v === null || v === undefined || v === '') return [];
    const items = typeof v === 'string' ? [v] : v;
    return items.flatMap((item): string[] => {
      if (typeof item === 'string') return item.trim() ? [item.trim()] : [];
      // a variable entry written as an object names the variable in one of these keys
      if (isRecord(item)) for (const key of ['ref', 'value', 'variable', 'id']) if (typeof item[key] === 'string' && item[key]) return [item[key]];
      return [];
    });
  }));

const unsupported = (what: string) => `${what} is not supported`;

/** The params of RAGFlow's Retrieval (component and tool) but `query`. */
export const retrievalShape = () => ({
  similarity_threshold: fraction(0.2),
  keywords_similarity_weight: fraction(0.5),
  top_n: count(8, 1024),
  top_k: count(1024, 100_000),
  dataset_ids: idList,
  /** RAGFlow's older name of `dataset_ids`, read when `dataset_ids` is empty. */
  kb_ids: idList,
  /** Variables holding knowledge base names or ids (a name, an id, or a list of them). */
  kb_vars: idList,
  empty_response: z.string().nullish().transform((v) => v ?? ''),
  use_kg: z.boolean().nullish().refine((v) => v !== true, unsupported('use_kg (knowledge graph retrieval)')),
  rerank_id: z.string().nullish().refine((v) => !v, unsupported('rerank_id (a rerank model)')),
  cross_languages: z.array(z.unknown()).nullish().refine((v) => !v || v.length === 0, unsupported('cross_languages (translating the query)')),
  toc_enhance: z.boolean().nullish().refine((v) => v !== true, unsupported('toc_enhance (table of contents retrieval)')),
  meta_data_filter: z
    .record(z.string(), z.unknown())
    .nullish()
    // RAGFlow filters by metadata only for these methods; any other (or none) filters nothing
    .refine((v) => !v || !['auto', 'semi_auto', 'manual'].includes(String(v.method)), unsupported('meta_data_filter (filtering documents by their metadata)')),
  retrieval_from: z
    .string()
    .nullish()
    .refine((v) => v !== 'memory', 'Retrieval from RAGFlow\'s memory is not supported')
    .transform((v) => v ?? 'dataset'),
  memory_ids: z.array(z.unknown()).nullish().refine((v) => !v || v.length === 0, 'Retrieval from RAGFlow\'s memory is not supported'),
});

export const retrievalSettings = z.lazy(() => z.looseObject(retrievalShape()));
export type RetrievalSettings = z.output<typeof retrievalSettings>;

/** The knowledge bases a Retrieval searches, as the DSL writes them: `dataset_ids`, else `kb_ids`, then `kb_vars`. */
export function datasetEntries(p: RetrievalSettings): { literal: string[]; variables: string[] } {
  const listed = p.dataset_ids.length > 0 ? p.dataset_ids : p.kb_ids;
  const literal: string[] = [];
  const variables: string[] = [];
  for (const entry of listed) (isVariableEntry(entry) ? variables : literal).push(entry);
  variables.push(...p.kb_vars);
  return { literal, variables };
}

/** RAGFlow reads an entry with `@` as a variable (`begin@kb`); so is a `{reference}`. */
function isVariableEntry(entry: string): boolean {
  return entry.includes('@') || exactReference(entry) !== undefined;
}

/**
 * Variables naming knowledge bases must name components that exist (the loader checks those
 * written in braces, as in every param; these are the bare ones).
 */
export function checkDatasetVariables(p: RetrievalSettings, scope: CheckScope, field: string): Omit<DslProblem, 'component_id'>[] {
  return datasetEntries(p).variables.flatMap((entry) => {
    if (exactReference(entry)) return [];
    const ref = asReference(entry);
    if (!ref) return [{ field, message: `"${entry}" is not a variable reference (e.g. "begin@kb" or "{sys.kb}")` }];
    return ref.kind === 'component' && !scope.has(ref.componentId) ? [{ field, message: `references a missing component "${ref.componentId}"` }] : [];
  });
}
