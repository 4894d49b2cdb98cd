/**
 * A local stand-in for a RAGFlow server's "Retrieve chunks" API (`POST /api/v1/retrieval`),
 * on 127.0.0.1 and an ephemeral port, answering as RAGFlow's `retrieval_test` does
 * (api/apps/restful_apis/chunk_api.py):
 *
 * - the API key: `Authorization: Bearer <key>` (or the bare key); anything else is HTTP 401
 *   `{"code": 401, "message": "<Unauthorized '401: Unauthorized'>", "data": null}`;
 * - the body, checked in RAGFlow's order, each problem answered HTTP 200 with its error
 *   envelope (`{"code": 102, "message": "`dataset_ids` is required."}`, ...); a `page_size`
 *   over 100 is RAGFlow's unhandled ValueError: HTTP 500 with an HTML page;
 * - the search: a small in-memory corpus scored with a term overlap (`term_similarity`) and a
 *   character-trigram cosine (`vector_similarity`) fused with `vector_similarity_weight`, the
 *   `similarity_threshold` applied, paged, `doc_aggs` counted over every match, the chunks in
 *   RAGFlow's public field names (`id`, `content`, `document_id`, `document_keyword`, ...).
 *
 * Scriptable per request (a queue, then a fallback): a status with a body (429, 500, ...), a
 * stall (never answers), a garbage body, an oversized body, a redirect. Every request is
 * recorded with its headers and body.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CorpusChunk {
  id: string;
  content: string;
  document_id: string;
  /** The document's name (RAGFlow's `docnm_kwd`). */
  document_keyword: string;
  dataset_id: string;
  important_keywords?: string[];
  /** RAGFlow's `position_int`: [page, left, right, top, bottom] lists, `[""]` for text files. */
  positions?: unknown[];
  image_id?: string;
  doc_type_kwd?: string;
}

export type ScriptedAnswer =
  | { kind: 'status'; status: number; body: string; contentType?: string; headers?: Record<string, string> }
  /** Never answers: the client's deadline has to end the exchange. */
  | { kind: 'stall' }
  /** HTTP 200 with a body that is not JSON. */
  | { kind: 'garbage'; body?: string }
  /** HTTP 200 with a JSON envelope padded to about `bytes`. */
  | { kind: 'oversized'; bytes: number }
  | { kind: 'redirect'; status: number; location: string };

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  rawBody: string;
  /** The parsed body; undefined when it is not JSON. */
  body: any;
}

export const UNAUTHORIZED_MESSAGE = "<Unauthorized '401: Unauthorized'>";
/** RAGFlow's REST_API_MAX_PAGE_SIZE. */
export const MAX_PAGE_SIZE = 100;

export interface RagflowServerOptions {
  apiKey: string;
  corpus: CorpusChunk[];
  /** Serve under a path prefix (a RAGFlow behind a reverse proxy), e.g. `/ragflow`. */
  prefix?: string;
}

export class RagflowRetrievalServer {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedAnswer[] = [];
  private fallback: ScriptedAnswer | undefined;
  private readonly arrivals = new Set<{ count: number; resolve: () => void }>();
  private readonly server: Server;
  private port = 0;

  private constructor(private readonly options: RagflowServerOptions) {
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  static async start(options: RagflowServerOptions): Promise<RagflowRetrievalServer> {
    const server = new RagflowRetrievalServer(options);
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.server.listen(0, '127.0.0.1', () => resolve());
    });
    server.port = (server.server.address() as AddressInfo).port;
    return server;
  }

  /** What a knowledge base's `ragflow.base_url` is set to. */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}${this.options.prefix ?? ''}`;
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Answers for the next requests, one each, in order. */
  enqueue(...answers: ScriptedAnswer[]): this {
    this.queue.push(...answers);
    return this;
  }

  /** The answer once the queue is empty; undefined: search the corpus. */
  always(answer: ScriptedAnswer | undefined): this {
    this.fallback = answer;
    return this;
  }

  /** Resolves once `count` requests have arrived in all. */
  arrived(count: number): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.arrivals.add({ count, resolve }));
  }

  reset(): void {
    this.queue.length = 0;
    this.fallback = undefined;
    this.requests.length = 0;
    this.server.closeAllConnections(); // stalled exchanges of the last test
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = JSON.parse(rawBody);
    } catch {
      body = undefined;
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    this.requests.push({ method: req.method ?? '', path: req.url ?? '', headers, rawBody, body });
    for (const waiter of this.arrivals) {
      if (this.requests.length < waiter.count) continue;
      this.arrivals.delete(waiter);
      waiter.resolve();
    }

    const script = this.queue.shift() ?? this.fallback;
    if (script) return this.scripted(res, script);

    if (req.method !== 'POST' || req.url !== `${this.options.prefix ?? ''}/api/v1/retrieval`) {
      return json(res, 404, { code: 404, message: `Not Found: ${req.url}`, data: null, error: 'Not Found' });
    }
    if (!authorized(headers.authorization, this.options.apiKey)) {
      return json(res, 401, { code: 401, message: UNAUTHORIZED_MESSAGE, data: null });
    }
    const answer = retrieve(typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {}, this.options.corpus);
    if (answer === 'page_size') return html(res, 500, '<h1>500 Internal Server Error</h1>');
    json(res, 200, answer);
  }

  private scripted(res: ServerResponse, script: ScriptedAnswer): void {
    switch (script.kind) {
      case 'stall':
        return; // the socket stays open until the client gives up or the server closes
      case 'status':
        res.writeHead(script.status, { 'content-type': script.contentType ?? 'application/json', ...script.headers }).end(script.body);
        return;
      case 'garbage':
        res.writeHead(200, { 'content-type': 'application/json' }).end(script.body ?? '<html>not json</html>');
        return;
      case 'oversized': {
        const padding = 'x'.repeat(script.bytes);
        json(res, 200, { code: 0, data: { chunks: [], doc_aggs: [], total: 0 }, padding });
        return;
      }
      case 'redirect':
        res.writeHead(script.status, { location: script.location }).end();
        return;
    }
  }
}

function authorized(header: string | undefined, apiKey: string): boolean {
  if (!header) return false;
  const token = header.slice(0, 7).toLowerCase() === 'bearer ' ? header.slice(7).trim() : header;
  return token === apiKey;
}

function json(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
}

function html(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' }).end(text);
}

const dataError = (message: string) => ({ code: 102, message });

/** RAGFlow's `retrieval_test`, its checks in its order; `'page_size'` for its unhandled ValueError. */
function retrieve(req: Record<string, unknown>, corpus: readonly CorpusChunk[]): unknown {
  const kbIds = req.dataset_ids;
  if (!truthy(kbIds)) return dataError('`dataset_ids` is required.');
  if (!Array.isArray(kbIds)) return dataError('`dataset_ids` should be a list');
  const known = new Set(corpus.map((c) => c.dataset_id));
  for (const id of kbIds) if (!known.has(id as string)) return dataError(`You don't own the dataset ${String(id)}.`);
  if (!('question' in req)) return dataError('`question` is required.');
  const page = positiveInt(req.page) ?? 1;
  const rawSize = req.page_size === undefined ? 30 : Number(req.page_size);
  const size = Number.isInteger(rawSize) && rawSize >= 1 ? rawSize : 30;
  if (size > MAX_PAGE_SIZE) return 'page_size';
  const question = typeof req.question === 'string' ? req.question.trim() : req.question;
  if (!truthy(question)) return { code: 0, data: { total: 0, chunks: [], doc_aggs: {} } };
  const docIds = req.document_ids ?? [];
  if (!Array.isArray(docIds)) return dataError('`documents` should be a list');
  const inDatasets = corpus.filter((c) => kbIds.includes(c.dataset_id));
  for (const id of docIds) if (!inDatasets.some((c) => c.document_id === id)) return dataError(`The datasets don't own the document ${String(id)}`);
  const threshold = Number(req.similarity_threshold ?? 0.2);
  const vectorWeight = Number(req.vector_similarity_weight ?? 0.3);
  const topK = Math.trunc(Number(req.top_k ?? 1024));
  if (!(topK > 0)) return dataError('`top_k` must be greater than 0');
  const highlightValue = req.highlight;
  let highlight: boolean;
  if (highlightValue === undefined || highlightValue === null) highlight = false;
  else if (typeof highlightValue === 'boolean') highlight = highlightValue;
  else if (typeof highlightValue === 'string' && ['true', 'false'].includes(highlightValue.toLowerCase())) highlight = highlightValue.toLowerCase() === 'true';
  else return dataError('`highlight` should be a boolean');

  const text = String(question);
  const terms = words(text);
  const candidates = inDatasets
    .filter((c) => docIds.length === 0 || docIds.includes(c.document_id))
    .map((chunk) => ({ chunk, vector: trigramCosine(text, chunk.content), term: termOverlap(terms, chunk.content) }))
    .sort((a, b) => b.vector - a.vector)
    .slice(0, topK)
    .map((c) => ({ ...c, similarity: (1 - vectorWeight) * c.term + vectorWeight * c.vector }));
  // As RAGFlow: the threshold means nothing for term-only scores.
  const floor = vectorWeight <= 0 ? 0 : threshold;
  const matched = candidates.filter((c) => c.similarity >= floor).sort((a, b) => b.similarity - a.similarity);

  const aggs = new Map<string, { doc_id: string; count: number }>();
  for (const { chunk } of matched) {
    const agg = aggs.get(chunk.document_keyword) ?? { doc_id: chunk.document_id, count: 0 };
    agg.count++;
    aggs.set(chunk.document_keyword, agg);
  }
  const chunks = matched.slice((page - 1) * size, page * size).map(({ chunk, vector, term, similarity }) => ({
    content: chunk.content,
    content_ltks: words(chunk.content).join(' '),
    document_id: chunk.document_id,
    document_keyword: chunk.document_keyword,
    ...(highlight ? { highlight: highlighted(chunk.content, terms) } : {}),
    id: chunk.id,
    image_id: chunk.image_id ?? '',
    important_keywords: chunk.important_keywords ?? [''],
    tag_kwd: [],
    dataset_id: chunk.dataset_id,
    positions: chunk.positions ?? [''],
    doc_type_kwd: chunk.doc_type_kwd ?? '',
    similarity,
    term_similarity: term,
    vector_similarity: vector,
  }));
  return {
    code: 0,
    data: {
      chunks,
      doc_aggs: [...aggs].sort((a, b) => b[1].count - a[1].count).map(([doc_name, v]) => ({ count: v.count, doc_id: v.doc_id, doc_name })),
      total: matched.length,
    },
  };
}

/** Python's truthiness for JSON values. */
function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === 'object' && value !== null) return Object.keys(value).length > 0;
  return Boolean(value);
}

function positiveInt(value: unknown): number | undefined {
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
}

export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

function termOverlap(terms: readonly string[], content: string): number {
  if (terms.length === 0) return 0;
  const present = new Set(words(content));
  return terms.filter((t) => present.has(t)).length / terms.length;
}

function trigrams(text: string): Map<string, number> {
  const s = ` ${words(text).join(' ')} `;
  const grams = new Map<string, number>();
  for (let i = 0; i + 3 <= s.length; i++) grams.set(s.slice(i, i + 3), (grams.get(s.slice(i, i + 3)) ?? 0) + 1);
  return grams;
}

function trigramCosine(a: string, b: string): number {
  const x = trigrams(a);
  const y = trigrams(b);
  let dot = 0;
  for (const [g, n] of x) dot += n * (y.get(g) ?? 0);
  const norm = (m: Map<string, number>) => Math.sqrt([...m.values()].reduce((s, n) => s + n * n, 0));
  const d = norm(x) * norm(y);
  return d === 0 ? 0 : dot / d;
}

function highlighted(content: string, terms: readonly string[]): string {
  const wanted = new Set(terms);
  return content.replace(/[\p{L}\p{N}]+/gu, (w) => (wanted.has(w.toLowerCase()) ? `<em>${w}</em>` : w));
}
