/**
 * Retrieval: searches the run's knowledge bases (lib/knowledge, through `knowledgeOf`) for its
 * `query`, as RAGFlow's Retrieval does. Outputs `formalized_content` — the chunks as the
 * knowledge text a model reads, each under its citation id — and `json`, the chunks as the
 * retriever returned them; the chunks join the pass's references, which every later
 * `message_end` carries. An empty query, or nothing found, gives `empty_response` (and `json`
 * empty). It reaches outside the run: an async turn keeps a checkpoint after it, so it is
 * never made twice for one turn; a batch run again from a checkpoint taken inside it (an Agent
 * beside it made a call) answers it from the checkpoint, and a replay against another version
 * from the recorded turn's state (recorded-retrieval.ts).
 *
 * `query` is a reference (`{sys.query}`, `Agent:X@content`, with or without braces) or text
 * with references in it; the knowledge bases are `dataset_ids` (else RAGFlow's `kb_ids`) —
 * ids, aliases or names, or variables (`begin@kb`, `{sys.kb}`) holding one or a list — and
 * the variables of `kb_vars`.
 */
import { z } from 'zod';
import { type ComponentContext, defineComponent } from '../canvas/component';
import { asReference, exactReference, valueToText } from '../canvas/references';
import { chunkReference, formatChunks } from '../knowledge/format';
import { checkDatasetVariables, retrievalShape } from './retrieval-params';
import { searchKnowledge } from './retrieval-search';
import { knowledgeOf } from './services';

const params = z.lazy(() =>
  z.looseObject({
    ...retrievalShape(),
    /** RAGFlow's default is empty: a Retrieval without a query finds nothing. */
    query: z.unknown().optional().transform((q) => (q === undefined || q === null ? '' : q)),
  }),
);

export const retrieval = defineComponent({
  name: 'Retrieval',
  external: true,
  params,
  defaultOutput: 'formalized_content',
  // references in `query` are checked by the loader, as in every param
  check: (p, scope) => checkDatasetVariables(p, scope, 'obj.params.dataset_ids'),
  async invoke(p, ctx) {
    const query = await queryText(p.query, ctx);
    if (query === '') return { outputs: { formalized_content: p.empty_response, json: [] } };
    const { result } = await searchKnowledge(p, query, {
      knowledge: knowledgeOf(ctx),
      signal: ctx.signal,
      get: (reference) => ctx.get(reference),
      record: (report) => ctx.recordCall(report),
      recorded: (call, accept) => ctx.recordedCall(call, accept),
      who: ctx.componentId,
    });
    if (result.chunks.length === 0) return { outputs: { formalized_content: p.empty_response, json: [] } };
    ctx.addReference(result.chunks.map(chunkReference), result.doc_aggs.map((d) => ({ ...d })));
    return { outputs: { formalized_content: formatChunks(result.chunks), json: result.chunks } };
  },
});

/**
 * The query as RAGFlow reads it: a reference (braces or not) gives its value, other text is
 * rendered. A bare `name@out` that names no output is text (an e-mail address, say).
 */
async function queryText(query: unknown, ctx: ComponentContext): Promise<string> {
  if (typeof query !== 'string') return valueToText(query).trim();
  const ref = asReference(query);
  if (ref) {
    const value = await ctx.get(query);
    if (value !== undefined || exactReference(query)) return valueToText(value).trim();
  }
  return (await ctx.render(query)).trim();
}
