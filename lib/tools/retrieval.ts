/**
 * Retrieval as an Agent's tool, as RAGFlow offers it: the function `search_my_dateset` (the
 * Agent adds `_<index>`) with one `query` argument, searching the knowledge bases its entry's
 * params name (the Retrieval component's params, lib/components/retrieval-params). The model
 * reads the chunks as knowledge text under their citation ids; the chunks go back as the
 * result's `references`, which the Agent adds to the pass's. Nothing found: `empty_response`,
 * else a sentence saying so. Failures: a transient one fails the turn, a permanent one (no
 * such knowledge base) is told to the model.
 *
 * The Agent records the call (what the model was given, the chunks in full when small) and
 * answers it from that record when a resumed batch or a replay makes it again; the entry's
 * knowledge bases and limits are part of the recorded request (`settings`), so a version that
 * changes them searches again.
 */
import { z } from 'zod';
import { datasetEntries, retrievalShape } from '../components/retrieval-params';
import { searchKnowledge } from '../components/retrieval-search';
import { chunkReference, formatChunks } from '../knowledge/format';
import { ToolError } from './errors';
import type { ToolKind } from './registry';
import type { Tool } from './types';

export const RETRIEVAL_FUNCTION = 'search_my_dateset';
export const RETRIEVAL_DESCRIPTION = 'This tool can be utilized for relevant content searching in the datasets.';
export const RETRIEVAL_QUERY_DESCRIPTION =
  'The keywords to search the dataset. The keywords should be the most important words/terms(includes synonyms) from the original request.';
/** What the model reads when nothing was found and the entry sets no `empty_response`. */
export const NOTHING_FOUND = 'Nothing relevant was found in the knowledge bases.';

const params = z.lazy(() =>
  z.looseObject({
    ...retrievalShape(),
    /** Shown to the model; RAGFlow's when empty. */
    description: z.string().nullish(),
    function_name: z.string().regex(/^[A-Za-z0-9_-]{1,56}$/, 'must be 1-56 letters, digits, _ or -').nullish(),
  }),
);
export type RetrievalToolParams = z.output<typeof params>;

export const retrievalTool: ToolKind<RetrievalToolParams> = {
  name: 'Retrieval',
  params,
  create(entry): Tool {
    const p = entry.params;
    return {
      name: p.function_name || RETRIEVAL_FUNCTION,
      description: p.description || RETRIEVAL_DESCRIPTION,
      parameters: {
        type: 'object',
        properties: { query: { type: 'string', description: RETRIEVAL_QUERY_DESCRIPTION } },
        required: ['query'],
      },
      settings: {
        datasets: datasetEntries(p),
        top_n: p.top_n,
        top_k: p.top_k,
        similarity_threshold: p.similarity_threshold,
        keywords_similarity_weight: p.keywords_similarity_weight,
        empty_response: p.empty_response,
      },
      async invoke(args, ctx) {
        const query = typeof args.query === 'string' ? args.query.trim() : '';
        if (query === '') return { kind: 'result', content: p.empty_response || NOTHING_FOUND };
        const knowledge = ctx.services.knowledge;
        if (!knowledge) throw new ToolError('knowledge bases are not configured for this run');
        const get = ctx.get;
        const { result } = await searchKnowledge(p, query, {
          knowledge,
          signal: ctx.signal,
          get: (reference) => (get ? get(reference) : Promise.resolve(undefined)),
          // the Agent records the tool call, with what the model was given
          record: () => undefined,
          who: `${ctx.componentId} (${entry.name})`,
        });
        if (result.chunks.length === 0) return { kind: 'result', content: p.empty_response || NOTHING_FOUND };
        return {
          kind: 'result',
          content: formatChunks(result.chunks),
          references: { chunks: result.chunks.map(chunkReference), doc_aggs: result.doc_aggs.map((d) => ({ ...d })) },
        };
      },
    };
  },
};
