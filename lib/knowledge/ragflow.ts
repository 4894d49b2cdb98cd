/**
 * The `ragflow` backend: a RAGFlow server's "Retrieve chunks" API (`POST /api/v1/retrieval`),
 * through the SSRF guard (every redirect too, and the address it approved is the one dialled).
 *
 * The API key is the tenant secret that `ragflow.api_key` names (`{secret.NAME}`), read at call
 * time and sent only as `Authorization: Bearer`; no error message carries it. RAGFlow's answer
 * uses its public field names (`id`, `content`, `document_id`, ...), mapped back here to the
 * retriever's own (`chunk_id`, `content_with_weight`, `doc_id`, ...), which the rest of Easel
 * speaks.
 *
 * Failures: 408/429/5xx, timeouts and the network are TransientError (the turn commits nothing);
 * an envelope with `code != 0`, any other 4xx, a refused URL and an answer that is not a
 * retrieval result are ComponentError. No retries here: a transient failure fails the turn.
 *
 * @example
 * const retrieve = createRagflowRetriever({ timeoutMs: 15_000 });
 * const { chunks, doc_aggs, total } = await retrieve(kb, query, { signal, secret, guard });
 */
import { z } from 'zod';
import { ComponentError, TransientError } from '../canvas/errors';
import { isTransientStatus } from '../llm/errors';
import { OutboundError, outboundRequest, type OutboundResponse } from '../outbound/request';
import { SsrfBlockedError } from '../outbound/ssrf';
import { redactSecrets } from '../secrets/redact';
import { SECRET_NAME } from '../secrets/tenant-secrets';
import type { DocAgg, RemoteRetriever, RetrievalQuery, RetrievalResult, RetrievedChunk, RetrieverDeps } from './types';

export interface RagflowRetrieverOptions {
  /** One deadline for the whole exchange (connection, redirects, the answer). @default 30000 */
  timeoutMs?: number;
  /** Larger answers fail (permanently). @default 4 MiB */
  maxResponseBytes?: number;
}

export const DEFAULT_RAGFLOW_TIMEOUT_MS = 30_000;
export const DEFAULT_RAGFLOW_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
/** RAGFlow refuses a larger `page_size` (REST_API_MAX_PAGE_SIZE); a larger `top_n` is capped to it. */
export const RAGFLOW_MAX_PAGE_SIZE = 100;
/** RAGFlow's messages are quoted up to this many characters. */
const MAX_QUOTED = 300;

const SECRET_REFERENCE = /^\{secret\.([^{}]*)\}$/;

/** The request body of RAGFlow's "Retrieve chunks", as this client sends it. */
export interface RagflowRetrievalRequest {
  question: string;
  dataset_ids: string[];
  document_ids: string[];
  page: number;
  page_size: number;
  similarity_threshold: number;
  vector_similarity_weight: number;
  top_k: number;
  /** RAGFlow would add keywords from a chat model of its own: off, the question is the query. */
  keyword: false;
  highlight: boolean;
}

export function createRagflowRetriever(options: RagflowRetrieverOptions = {}): RemoteRetriever {
  const timeoutMs = options.timeoutMs ?? DEFAULT_RAGFLOW_TIMEOUT_MS;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_RAGFLOW_MAX_RESPONSE_BYTES;

  return async (kb, query, deps) => {
    if (kb.backend !== 'ragflow') throw new ComponentError(`knowledge base "${kb.name}" is not a RAGFlow knowledge base`);
    const where = `knowledge base "${kb.name}"`;
    // An empty document list means "none of them" (a metadata filter that matched nothing);
    // RAGFlow would read it as "no filter" and search everything.
    if (query.doc_ids !== undefined && query.doc_ids.length === 0) return { chunks: [], doc_aggs: [], total: 0 };

    const url = retrievalUrl(kb.ragflow.base_url, where);
    const apiKey = await apiKeyOf(kb.ragflow.api_key, deps, where);
    const body = ragflowRequest(kb.ragflow.dataset_ids, query);

    let response: OutboundResponse;
    try {
      response = await outboundRequest({
        url,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${apiKey}` },
        body: JSON.stringify(body),
        timeoutMs,
        maxResponseBytes,
        guard: deps.guard,
        signal: deps.signal,
      });
    } catch (error) {
      throw requestFailure(error, where, timeoutMs, deps.signal, apiKey);
    }
    return readAnswer(response, where, apiKey);
  };
}

/** The body sent for `query` over `datasetIds`. Exported for tests and diagnostics. */
export function ragflowRequest(datasetIds: readonly string[], query: RetrievalQuery): RagflowRetrievalRequest {
  return {
    question: query.question,
    dataset_ids: [...datasetIds],
    document_ids: [...(query.doc_ids ?? [])],
    page: query.page ?? 1,
    page_size: Math.min(query.top_n, RAGFLOW_MAX_PAGE_SIZE),
    similarity_threshold: query.similarity_threshold,
    vector_similarity_weight: 1 - query.keywords_similarity_weight,
    top_k: query.top_k,
    keyword: false,
    highlight: query.highlight ?? false,
  };
}

function retrievalUrl(baseUrl: string, where: string): string {
  let base: URL;
  try {
    base = new URL(baseUrl);
  } catch {
    throw new ComponentError(`${where}: ragflow.base_url is not a valid URL`);
  }
  if (base.search !== '' || base.hash !== '') throw new ComponentError(`${where}: ragflow.base_url must not carry a query or fragment`);
  // A server behind a path prefix (https://example.com/ragflow) keeps it.
  return `${base.origin}${base.pathname.replace(/\/+$/, '')}/api/v1/retrieval`;
}

async function apiKeyOf(reference: string, deps: RetrieverDeps, where: string): Promise<string> {
  const name = SECRET_REFERENCE.exec(reference.trim())?.[1];
  if (name === undefined || !SECRET_NAME.test(name)) {
    throw new ComponentError(`${where}: ragflow.api_key must name a secret as {secret.NAME}`);
  }
  const value = await deps.secret(name);
  if (value === undefined || value === '') throw new ComponentError(`${where}: the secret ${name} (ragflow.api_key) is not set`);
  return value;
}

function requestFailure(error: unknown, where: string, timeoutMs: number, signal: AbortSignal, apiKey: string): Error {
  if (error instanceof SsrfBlockedError) return new ComponentError(`${where}: ${error.message}`);
  if (error instanceof OutboundError) {
    if (error.reason === 'timeout') return new TransientError(`${where}: the RAGFlow server did not answer within ${timeoutMs} ms`);
    if (error.reason === 'aborted' || signal.aborted) return new TransientError(`${where}: the retrieval was cancelled`);
    const message = `${where}: ${redactSecrets(error.message, [apiKey])}`;
    return error.transient ? new TransientError(message) : new ComponentError(message);
  }
  if (signal.aborted) return new TransientError(`${where}: the retrieval was cancelled`);
  // Nothing of an unknown error is passed on: it might hold the request.
  return new ComponentError(`${where}: the request to the RAGFlow server failed`);
}

// ---- the answer ---------------------------------------------------------------------------------

const Envelope = z.lazy(() => z.object({ code: z.number(), message: z.string().optional(), data: z.unknown().optional() }));

/** Lenient where RAGFlow's retrievers differ (Elasticsearch, Infinity, ...), strict on what a chunk is. */
const Chunk = z.lazy(() => z.object({
  id: z.union([z.string(), z.number()]).transform(String),
  content: z.string().catch(''),
  document_id: z.string().catch(''),
  document_keyword: z.string().catch(''),
  dataset_id: z.string().catch(''),
  important_keywords: z.array(z.unknown()).catch([]),
  image_id: z.string().catch(''),
  positions: z.array(z.unknown()).catch([]),
  similarity: z.number().catch(0),
  vector_similarity: z.number().catch(0),
  term_similarity: z.number().catch(0),
  doc_type_kwd: z.string().catch(''),
  highlight: z.string().optional().catch(undefined),
}));

const Data = z.lazy(() => z.object({
  chunks: z.array(Chunk),
  // An empty question is answered `{}` here, a list otherwise.
  doc_aggs: z
    .union([z.array(z.object({ doc_name: z.string().catch(''), doc_id: z.string().catch(''), count: z.number().catch(0) })), z.object({})])
    .catch([]),
  total: z.number().int().nonnegative().catch(0),
}));

function readAnswer(response: OutboundResponse, where: string, apiKey: string): RetrievalResult {
  const quote = (text: string) => bounded(redactSecrets(text, [apiKey]));
  let json: unknown;
  try {
    json = JSON.parse(response.body);
  } catch {
    json = undefined;
  }
  const envelope = Envelope.safeParse(json);
  const status = response.status;

  if (status < 200 || status > 299) {
    const message = envelope.success && envelope.data.message ? quote(envelope.data.message) : undefined;
    if (isTransientStatus(status)) {
      throw new TransientError(`${where}: the RAGFlow server answered HTTP ${status}${message ? `: ${message}` : ''}`);
    }
    throw new ComponentError(`${where}: the RAGFlow server refused: ${message ?? `HTTP ${status}`}`);
  }
  if (!envelope.success) throw new ComponentError(`${where}: the RAGFlow server's answer is not a RAGFlow API answer`);
  if (envelope.data.code !== 0) {
    throw new ComponentError(`${where}: the RAGFlow server refused: ${quote(envelope.data.message ?? `code ${envelope.data.code}`)}`);
  }
  const data = Data.safeParse(envelope.data.data);
  if (!data.success) throw new ComponentError(`${where}: the RAGFlow server's answer is not a retrieval result`);

  return {
    chunks: data.data.chunks.map(toRetrievedChunk),
    doc_aggs: Array.isArray(data.data.doc_aggs) ? (data.data.doc_aggs satisfies DocAgg[]) : [],
    total: data.data.total,
  };
}

function toRetrievedChunk(chunk: z.infer<typeof Chunk>): RetrievedChunk {
  const out: RetrievedChunk = {
    chunk_id: chunk.id,
    content_with_weight: chunk.content,
    doc_id: chunk.document_id,
    docnm_kwd: chunk.document_keyword,
    kb_id: chunk.dataset_id,
    important_kwd: chunk.important_keywords.filter((k): k is string => typeof k === 'string'),
    image_id: chunk.image_id,
    similarity: chunk.similarity,
    vector_similarity: chunk.vector_similarity,
    term_similarity: chunk.term_similarity,
    // Documents without pages answer `[""]`; only [page, left, right, top, bottom] lists are positions.
    positions: chunk.positions.filter(
      (p): p is number[] => Array.isArray(p) && p.length > 0 && p.every((n) => typeof n === 'number' && Number.isFinite(n)),
    ),
    doc_type_kwd: chunk.doc_type_kwd,
  };
  if (chunk.highlight !== undefined) out.highlight = chunk.highlight;
  return out;
}

function bounded(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > MAX_QUOTED ? `${oneLine.slice(0, MAX_QUOTED)}…` : oneLine;
}
