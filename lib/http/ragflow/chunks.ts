/**
 * Parsing and chunks (mounted at /api/v1/datasets/{id}): `POST .../chunks {document_ids}`
 * parses the documents, `DELETE .../chunks` is RAGFlow's stop, and `GET
 * .../documents/{doc}/chunks` lists a document's chunks. Answers and messages follow RAGFlow's
 * `chunk_api.py`.
 *
 * Easel parses within the request that asks (there is no task queue between requests), so the
 * parse answers once every document is DONE or FAIL, and the `list_documents` RAGFlow's SDK
 * polls afterwards reports that status at once. A stop therefore never meets a parse it could
 * stop: it is answered as RAGFlow answers a document that is not being parsed.
 */
import type { KnowledgeDocument } from '../../knowledge/types';
import type { AppDeps } from '../app';
import { guardOf, pageOf, param, routeGroup } from './context';
import { type DatasetCaller, datasetCaller, documentOf, notOwned, ownedDataset } from './dataset-access';
import { chunkRow, documentRow } from './dataset-views';
import { failure, jsonBody, ok, RAGFLOW, RagflowError } from './envelope';

const STOP_INVALID_STATE = "Can't stop parsing document that has not started or already completed";

export function chunkRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);

  app.post('/chunks', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    const kb = await ownedDataset(caller, id, notOwned.dataset(id));
    const { unique, duplicates } = documentIds((await jsonBody(c)).document_ids);
    const found: KnowledgeDocument[] = [];
    const notFound: string[] = [];
    for (const docId of unique) {
      const doc = await documentOf(caller, kb.id, docId);
      if (doc) found.push(doc);
      else notFound.push(docId);
    }
    if (found.some((d) => d.status === 'RUNNING')) throw new RagflowError(RAGFLOW.data, "Can't parse document that is currently being processed");
    if (found.length > 0) await caller.knowledge.parse(caller.tenant, kb.id, found.map((d) => d.id));
    if (notFound.length > 0) throw new RagflowError(RAGFLOW.data, `Documents not found: [${notFound.map((d) => `'${d}'`).join(', ')}]`);
    if (duplicates.length > 0) {
      if (found.length === 0) throw new RagflowError(RAGFLOW.data, duplicates.join(';'));
      return ok(c, { success_count: found.length, errors: duplicates });
    }
    return ok(c);
  }));

  app.delete('/chunks', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    const kb = await ownedDataset(caller, id, notOwned.dataset(id));
    const { unique } = documentIds((await jsonBody(c)).document_ids);
    for (const docId of unique) {
      const doc = await documentOf(caller, kb.id, docId);
      if (!doc) throw new RagflowError(RAGFLOW.data, `you don't own the document ${docId}`);
      if (doc.status !== 'RUNNING') return failure(c, RAGFLOW.data, STOP_INVALID_STATE, { error_code: 'DOC_STOP_PARSING_INVALID_STATE' });
      // another request is parsing it, within that request: nothing here can interrupt it
      throw new RagflowError(RAGFLOW.operation, 'Easel parses a document within the request that asked for it; a parse in progress cannot be stopped.');
    }
    return ok(c);
  }));

  app.get('/documents/:doc/chunks', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    const docId = param(c, 'doc');
    const kb = await ownedDataset(caller, id, notOwned.dataset(id));
    const doc = await documentOf(caller, kb.id, docId);
    if (!doc) throw new RagflowError(RAGFLOW.data, `you don't own the document ${docId}`);
    const q = c.req.query();
    if (q.available !== undefined) throw new RagflowError(RAGFLOW.argument, 'The chunk filter `available` is not supported by Easel: every chunk is available.');
    const { page, size } = pageOf(q);
    const chunkIds = [...new Set((c.req.queries().chunk_ids ?? []).flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== ''))];
    const { total, chunks } = q.id
      ? await oneChunk(caller, kb.id, doc, q.id, id)
      : chunkIds.length > 0
        ? await chunksById(caller, kb.id, doc, chunkIds)
        : await chunkPage(caller, kb.id, doc, page, size, q.keywords);
    return ok(c, { total, chunks, doc: documentRow(doc, kb) });
  }));

  return app;
}

/** `document_ids` as RAGFlow checks it: required, a list; repeats reported, each id taken once. */
function documentIds(value: unknown): { unique: string[]; duplicates: string[] } {
  if (value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)) throw new RagflowError(RAGFLOW.data, '`document_ids` is required');
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw new RagflowError(RAGFLOW.argument, '`document_ids` should be a list of document ids');
  const unique = [...new Set(value as string[])];
  const duplicates = unique.filter((id) => value.filter((v) => v === id).length > 1).map((id) => `Duplicate document ids: ${id}`);
  return { unique, duplicates };
}

async function chunkPage(caller: DatasetCaller, kbId: string, doc: KnowledgeDocument, page: number, size: number, keywords: string | undefined) {
  const listed = await caller.knowledge.listChunks(caller.tenant, kbId, doc.id, { page, page_size: size, ...(keywords ? { keywords } : {}) });
  return { total: listed.total, chunks: listed.items.map((ch) => chunkRow(ch, doc.name)) };
}

async function oneChunk(caller: DatasetCaller, kbId: string, doc: KnowledgeDocument, chunkId: string, datasetId: string) {
  const listed = await caller.knowledge.listChunks(caller.tenant, kbId, doc.id, { page: 1, page_size: 1, id: chunkId });
  const chunk = listed.items[0];
  if (!chunk) throw new RagflowError(RAGFLOW.data, `Chunk not found: ${datasetId}/${chunkId}`);
  return { total: 1, chunks: [chunkRow(chunk, doc.name)] };
}

async function chunksById(caller: DatasetCaller, kbId: string, doc: KnowledgeDocument, chunkIds: readonly string[]) {
  if (chunkIds.length > 100) throw new RagflowError(RAGFLOW.argument, 'chunk_ids must contain at most 100 IDs');
  const chunks = [];
  for (const chunkId of chunkIds) {
    const found = (await caller.knowledge.listChunks(caller.tenant, kbId, doc.id, { page: 1, page_size: 1, id: chunkId })).items[0];
    if (found) chunks.push(chunkRow(found, doc.name));
  }
  return { total: chunks.length, chunks };
}
