/**
 * `POST /api/v1/retrieval`: RAGFlow's retrieval test over the caller's datasets, checked and
 * answered as its `chunk_api.py` does (`{chunks, doc_aggs, total}`, chunks renamed: `id`,
 * `content`, `document_id`, `document_keyword`, `dataset_id`). `vector_similarity_weight` is the
 * vector score's weight; the full-text score weighs the rest. What needs a model or an index
 * Easel does not have is refused by name rather than ignored: a rerank model, keyword
 * extraction (`keyword`), translation (`cross_languages`), a knowledge graph (`use_kg`), a table
 * of contents (`toc_enhance`) and metadata filters.
 */
import { pythonText } from '../../components/python-values';
import type { KnowledgeBase } from '../../knowledge/types';
import type { AppDeps } from '../app';
import { searchKnowledge } from '../knowledge';
import { guardOf, routeGroup } from './context';
import { datasetCaller, documentOf, notOwned, ownedDataset } from './dataset-access';
import { retrievedRow } from './dataset-views';
import { jsonBody, ok, RAGFLOW, RagflowError } from './envelope';

const MAX_PAGE_SIZE = 100;

export function retrievalRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);

  app.post('/retrieval', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const req = await jsonBody(c);
    const datasetIds = req.dataset_ids;
    if (!datasetIds || (Array.isArray(datasetIds) && datasetIds.length === 0)) throw new RagflowError(RAGFLOW.data, '`dataset_ids` is required.');
    if (!Array.isArray(datasetIds)) throw new RagflowError(RAGFLOW.data, '`dataset_ids` should be a list');
    if (datasetIds.length > MAX_PAGE_SIZE) throw new RagflowError(RAGFLOW.argument, `dataset_ids must contain at most ${MAX_PAGE_SIZE} IDs`);
    const kbs: KnowledgeBase[] = [];
    for (const id of datasetIds) {
      const text = pythonText(id);
      const kb = await ownedDataset(caller, typeof id === 'string' ? id : '', notOwned.dataset(text));
      if (!kbs.some((k) => k.id === kb.id)) kbs.push(kb);
    }
    if (!('question' in req)) throw new RagflowError(RAGFLOW.data, '`question` is required.');
    const page = positiveInt(req.page, 1);
    const pageSize = positiveInt(req.page_size, 30);
    if (pageSize > MAX_PAGE_SIZE) throw new RagflowError(RAGFLOW.argument, `page_size must be less than or equal to ${MAX_PAGE_SIZE}`);
    if (typeof req.question !== 'string') throw new RagflowError(RAGFLOW.argument, '`question` should be a string');
    const question = req.question.trim();
    if (!question) return ok(c, { total: 0, chunks: [], doc_aggs: {} });

    const docIds = req.document_ids ?? [];
    if (!Array.isArray(docIds)) throw new RagflowError(RAGFLOW.data, '`documents` should be a list');
    for (const docId of docIds) {
      const owned = typeof docId === 'string' && (await Promise.all(kbs.map((kb) => documentOf(caller, kb.id, docId)))).some(Boolean);
      if (!owned) throw new RagflowError(RAGFLOW.data, `The datasets don't own the document ${pythonText(docId)}`);
    }
    refuseWhatEaselLacks(req);
    const threshold = fraction(req, 'similarity_threshold', 0.2);
    const vectorWeight = fraction(req, 'vector_similarity_weight', 0.3);
    const topK = integer(req.top_k, 1024, 'top_k');
    if (topK <= 0) throw new RagflowError(RAGFLOW.data, '`top_k` must be greater than 0');
    const highlight = flag(req.highlight);

    const result = await searchKnowledge(caller.knowledge, caller.tenant, kbs, {
      question,
      top_n: pageSize,
      top_k: topK,
      similarity_threshold: threshold,
      keywords_similarity_weight: 1 - vectorWeight,
      page,
      highlight,
      ...(docIds.length > 0 ? { doc_ids: docIds as string[] } : {}),
    }, c.req.raw.signal);
    return ok(c, { chunks: result.chunks.map(retrievedRow), doc_aggs: result.doc_aggs, total: result.total });
  }));

  return app;
}

function refuseWhatEaselLacks(req: Record<string, unknown>): void {
  const refuse = (message: string) => {
    throw new RagflowError(RAGFLOW.argument, message);
  };
  if (typeof req.rerank_id === 'string' ? req.rerank_id.trim() !== '' : req.rerank_id != null) refuse('Rerank models are not supported by Easel: leave `rerank_id` empty (chunks are ranked by their combined similarity).');
  if (req.keyword === true || req.keyword === 'true') refuse('`keyword` (keywords a chat model extracts and adds to the question) is not supported by Easel: put the keywords in `question`.');
  if (Array.isArray(req.cross_languages) ? req.cross_languages.length > 0 : req.cross_languages != null) refuse('`cross_languages` (translating the question with a chat model) is not supported by Easel.');
  if (req.use_kg === true) refuse('`use_kg`: Easel builds no knowledge graphs.');
  if (req.toc_enhance === true) refuse('`toc_enhance`: Easel extracts no tables of contents.');
  if (req.metadata_condition != null && !(typeof req.metadata_condition === 'object' && Object.keys(req.metadata_condition).length === 0)) {
    refuse('`metadata_condition`: Easel keeps no document metadata to filter on; name the documents in `document_ids`.');
  }
}

/** RAGFlow's `validate_rest_api_page`: anything but a positive integer falls back to the default. */
function positiveInt(value: unknown, fallback: number): number {
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? n : fallback;
}

/** Python's `int()` of a number or numeric text. */
function integer(value: unknown, fallback: number, name: string): number {
  if (value === undefined || value === null) return fallback;
  const n = typeof value === 'string' && /^\s*[+-]?\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n)) throw new RagflowError(RAGFLOW.argument, `\`${name}\` should be an integer`);
  return Math.trunc(n);
}

/** Python's `float()` of a number or numeric text, within 0..1. */
function fraction(req: Record<string, unknown>, name: string, fallback: number): number {
  const value = req[name];
  if (value === undefined || value === null) return fallback;
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0 || n > 1) throw new RagflowError(RAGFLOW.argument, `\`${name}\` should be a number from 0 to 1`);
  return n;
}

function flag(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && ['true', 'false'].includes(value.toLowerCase())) return value.toLowerCase() === 'true';
  throw new RagflowError(RAGFLOW.data, '`highlight` should be a boolean');
}
