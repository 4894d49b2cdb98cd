/**
 * The `ragflow` backend against a local server that speaks RAGFlow's retrieval API: the request
 * as RAGFlow reads it (checked server-side), the answer mapped to the retriever's field names,
 * every failure classified, the SSRF guard on the URL and its redirects, the key kept secret.
 */
import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ComponentError, TransientError } from '../../lib/canvas/errors';
import { createRagflowRetriever, type RagflowRetrieverOptions } from '../../lib/knowledge/ragflow';
import type { KnowledgeBase, RetrievalQuery, RetrieverDeps } from '../../lib/knowledge/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { type CorpusChunk, RagflowRetrievalServer, UNAUTHORIZED_MESSAGE } from '../helpers/ragflow-retrieval-server';

const API_KEY = 'ragflow-Zk3xQ9vLmP2sT7wY4nB8cD1fG6hJ0kM5';
const DATASET = 'b2a62730759d11ef987d0242ac120004';
const OTHER_DATASET = 'c7ee74067a2c11efb21c0242ac120006';
const GUIDE = '5c5999ec7be811ef9cab0242ac120005';
const FAQ = '77df9ef4759a11ef8bdd0242ac120004';
const NOTES = '0e1f2a3b4c5d6e7f8091a2b3c4d5e6f7';

const CORPUS: CorpusChunk[] = [
  {
    id: 'd78435d142bd5cf6704da62c778795c5',
    content: 'RAGFlow is an open-source retrieval engine built on deep document understanding.',
    document_id: GUIDE,
    document_keyword: 'guide.pdf',
    dataset_id: DATASET,
    important_keywords: ['ragflow', 'retrieval'],
    positions: [[1, 10, 200, 30, 60]],
  },
  {
    id: 'a1b2c3d4e5f60718293a4b5c6d7e8f90',
    content: 'The retrieval engine ranks chunks by fusing keyword and vector similarity.',
    document_id: GUIDE,
    document_keyword: 'guide.pdf',
    dataset_id: DATASET,
    positions: [[2, 5, 100, 40, 80]],
  },
  {
    id: 'f0e1d2c3b4a5968778695a4b3c2d1e0f',
    content: 'Which retrieval settings matter? The similarity threshold and the vector weight.',
    document_id: FAQ,
    document_keyword: 'faq.txt',
    dataset_id: DATASET,
  },
  {
    id: '11223344556677889900aabbccddeeff',
    content: 'Bananas are rich in potassium.',
    document_id: NOTES,
    document_keyword: 'notes.md',
    dataset_id: OTHER_DATASET,
  },
];

let server: RagflowRetrievalServer;
/** Every error a retriever threw in this file, checked for the key at the end. */
const thrown: unknown[] = [];

beforeAll(async () => {
  server = await RagflowRetrievalServer.start({ apiKey: API_KEY, corpus: CORPUS });
});
afterAll(async () => {
  await server.close();
  const seen = thrown.map((e) => `${String(e)} ${JSON.stringify(e)} ${String((e as Error).cause ?? '')}`).join('\n');
  expect(thrown.length).toBeGreaterThan(10);
  expect(seen).not.toContain(API_KEY);
});
beforeEach(() => server.reset());

function knowledgeBase(ragflow: Partial<Extract<KnowledgeBase, { backend: 'ragflow' }>['ragflow']> = {}): KnowledgeBase {
  return {
    id: '9f86d081884c7d659a2feaa0c55ad015',
    tenant: 'acme',
    name: 'Product docs',
    description: '',
    aliases: [],
    document_count: 0,
    chunk_count: 0,
    token_count: 0,
    created_at: '2025-01-01T00:00:00.000Z',
    updated_at: '2025-01-01T00:00:00.000Z',
    backend: 'ragflow',
    ragflow: { base_url: server.baseUrl, api_key: '{secret.RAGFLOW_KEY}', dataset_ids: [DATASET], ...ragflow },
  };
}

function query(overrides: Partial<RetrievalQuery> = {}): RetrievalQuery {
  return { question: 'retrieval engine', top_n: 8, top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5, ...overrides };
}

function deps(overrides: Partial<RetrieverDeps> = {}, secrets: Record<string, string> = { RAGFLOW_KEY: API_KEY }): RetrieverDeps {
  return {
    signal: new AbortController().signal,
    secret: (name) => secrets[name],
    guard: new SsrfGuard({ allow: ['127.0.0.1'] }),
    ...overrides,
  };
}

const retrieve = (options: RagflowRetrieverOptions = {}) => createRagflowRetriever({ timeoutMs: 10_000, ...options });

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    thrown.push(error);
    return error as Error;
  }
  throw new Error('expected the retrieval to fail');
}

async function permanent(promise: Promise<unknown>): Promise<string> {
  const error = await failure(promise);
  expect(error).toBeInstanceOf(ComponentError);
  expect(error).not.toBeInstanceOf(TransientError);
  return error.message;
}

async function transient(promise: Promise<unknown>): Promise<string> {
  const error = await failure(promise);
  expect(error).toBeInstanceOf(TransientError);
  return error.message;
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('ragflow backend: the request', () => {
  it('POSTs /api/v1/retrieval with the Bearer key and exactly the body of RAGFlow\'s "Retrieve chunks"', async () => {
    await retrieve()(knowledgeBase(), query({ keywords_similarity_weight: 0.3 }), deps());
    expect(server.requests).toHaveLength(1);
    const [request] = server.requests;
    expect(request!.method).toBe('POST');
    expect(request!.path).toBe('/api/v1/retrieval');
    expect(request!.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.body).toEqual({
      question: 'retrieval engine',
      dataset_ids: [DATASET],
      document_ids: [],
      page: 1,
      page_size: 8,
      similarity_threshold: 0.2,
      vector_similarity_weight: 0.7,
      top_k: 1024,
      keyword: false,
      highlight: false,
    });
  });

  it('passes the documents, the page and highlighting on, and keeps a base URL\'s path prefix', async () => {
    const prefixed = await RagflowRetrievalServer.start({ apiKey: API_KEY, corpus: CORPUS, prefix: '/ragflow' });
    try {
      const kb = knowledgeBase({ base_url: `${prefixed.baseUrl}/`, dataset_ids: [DATASET, OTHER_DATASET] });
      const result = await retrieve()(kb, query({ doc_ids: [GUIDE], page: 2, top_n: 1, highlight: true, similarity_threshold: 0 }), deps());
      expect(prefixed.requests[0]!.path).toBe('/ragflow/api/v1/retrieval');
      expect(prefixed.requests[0]!.body).toMatchObject({ dataset_ids: [DATASET, OTHER_DATASET], document_ids: [GUIDE], page: 2, page_size: 1, highlight: true });
      expect(result.total).toBe(2);
      expect(result.chunks).toHaveLength(1);
      expect(result.chunks[0]!.doc_id).toBe(GUIDE);
      expect(result.chunks[0]!.highlight).toMatch(/<em>retrieval<\/em> <em>engine<\/em>/i);
    } finally {
      await prefixed.close();
    }
  });

  it('caps page_size at RAGFlow\'s maximum of 100, which RAGFlow would answer with a 500', async () => {
    const result = await retrieve()(knowledgeBase(), query({ top_n: 500 }), deps());
    expect(server.requests[0]!.body.page_size).toBe(100);
    expect(result.chunks.length).toBeGreaterThan(0);
  });

  it('asks nothing when the query allows no document at all (an empty doc_ids is "none", not "all")', async () => {
    const result = await retrieve()(knowledgeBase(), query({ doc_ids: [] }), deps());
    expect(result).toEqual({ chunks: [], doc_aggs: [], total: 0 });
    expect(server.requests).toHaveLength(0);
  });
});

describe('ragflow backend: the answer', () => {
  it('maps RAGFlow\'s public field names back to the retriever\'s, best first, with doc_aggs and total', async () => {
    const result = await retrieve()(knowledgeBase(), query(), deps());
    expect(result.total).toBe(3);
    // the server's order (best first), the bananas of the other dataset not among them
    expect(result.chunks.map((c) => c.chunk_id)).toEqual(['d78435d142bd5cf6704da62c778795c5', 'a1b2c3d4e5f60718293a4b5c6d7e8f90', 'f0e1d2c3b4a5968778695a4b3c2d1e0f']);
    const scores = result.chunks.map((c) => c.similarity);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    const first = result.chunks.find((c) => c.chunk_id === 'd78435d142bd5cf6704da62c778795c5')!;
    expect(first).toMatchObject({
      content_with_weight: CORPUS[0]!.content,
      doc_id: GUIDE,
      docnm_kwd: 'guide.pdf',
      kb_id: DATASET,
      important_kwd: ['ragflow', 'retrieval'],
      image_id: '',
      positions: [[1, 10, 200, 30, 60]],
      doc_type_kwd: '',
    });
    expect(first.highlight).toBeUndefined();
    for (const chunk of result.chunks) {
      expect(chunk.similarity).toBeCloseTo(0.5 * chunk.term_similarity + 0.5 * chunk.vector_similarity, 10);
      expect(chunk.similarity).toBeGreaterThanOrEqual(0.2);
    }
    // a text file's positions are [""] in RAGFlow's answer: no positions
    expect(result.chunks.find((c) => c.doc_id === FAQ)!.positions).toEqual([]);
    expect(result.doc_aggs).toEqual([
      { doc_name: 'guide.pdf', doc_id: GUIDE, count: 2 },
      { doc_name: 'faq.txt', doc_id: FAQ, count: 1 },
    ]);
  });

  it('reads an empty question\'s answer, whose doc_aggs RAGFlow sends as {}', async () => {
    expect(await retrieve()(knowledgeBase(), query({ question: '   ' }), deps())).toEqual({ chunks: [], doc_aggs: [], total: 0 });
  });
});

describe('ragflow backend: failures', () => {
  it('a missing secret is a permanent error naming the secret, and nothing is sent', async () => {
    const message = await permanent(retrieve()(knowledgeBase(), query(), deps({}, {})));
    expect(message).toBe('knowledge base "Product docs": the secret RAGFLOW_KEY (ragflow.api_key) is not set');
    expect(server.requests).toHaveLength(0);
  });

  it('a key written into the settings instead of a secret reference is refused, and not repeated', async () => {
    const message = await permanent(retrieve()(knowledgeBase({ api_key: API_KEY }), query(), deps()));
    expect(message).toContain('ragflow.api_key must name a secret as {secret.NAME}');
    expect(message).not.toContain(API_KEY);
    expect(server.requests).toHaveLength(0);
  });

  it('a wrong key is RAGFlow\'s 401, permanent, with its message', async () => {
    const message = await permanent(retrieve()(knowledgeBase(), query(), deps({}, { RAGFLOW_KEY: 'ragflow-wrong-key-000000000000' })));
    expect(message).toBe(`knowledge base "Product docs": the RAGFlow server refused: ${UNAUTHORIZED_MESSAGE}`);
  });

  it.each([
    ['no dataset ids', { dataset_ids: [] }, '`dataset_ids` is required.'],
    ['a dataset of someone else', { dataset_ids: ['ffffffffffffffffffffffffffffffff'] }, "You don't own the dataset ffffffffffffffffffffffffffffffff."],
  ])('an error envelope (%s) is permanent, with RAGFlow\'s message', async (_, settings, expected) => {
    const message = await permanent(retrieve()(knowledgeBase(settings), query(), deps()));
    expect(message).toBe(`knowledge base "Product docs": the RAGFlow server refused: ${expected}`);
  });

  it('a document outside the datasets is RAGFlow\'s error envelope, permanent', async () => {
    const message = await permanent(retrieve()(knowledgeBase(), query({ doc_ids: [NOTES] }), deps()));
    expect(message).toContain(`The datasets don't own the document ${NOTES}`);
  });

  it.each([
    [429, '{"code": 429, "message": "Too many requests"}', 'HTTP 429: Too many requests'],
    [500, '<h1>500 Internal Server Error</h1>', 'HTTP 500'],
    [502, 'Bad Gateway', 'HTTP 502'],
    [503, '', 'HTTP 503'],
    [408, '', 'HTTP 408'],
  ])('HTTP %i is transient', async (status, body, expected) => {
    server.enqueue({ kind: 'status', status, body, contentType: body.startsWith('{') ? 'application/json' : 'text/html' });
    expect(await transient(retrieve()(knowledgeBase(), query(), deps()))).toBe(`knowledge base "Product docs": the RAGFlow server answered ${expected}`);
  });

  it.each([
    [404, '{"code": 404, "message": "Not Found: /api/v1/retrieval", "data": null, "error": "Not Found"}', 'Not Found: /api/v1/retrieval'],
    [400, 'bad request', 'HTTP 400'],
    [403, '{"code": 108, "message": "Permission error"}', 'Permission error'],
  ])('HTTP %i is permanent', async (status, body, expected) => {
    server.enqueue({ kind: 'status', status, body });
    expect(await permanent(retrieve()(knowledgeBase(), query(), deps()))).toBe(`knowledge base "Product docs": the RAGFlow server refused: ${expected}`);
  });

  it('an answer that is not JSON, or not a retrieval result, is permanent', async () => {
    server.enqueue({ kind: 'garbage' }, { kind: 'status', status: 200, body: '{"code": 0, "data": {"chunks": [{"content": "no id"}]}}' });
    expect(await permanent(retrieve()(knowledgeBase(), query(), deps()))).toContain('is not a RAGFlow API answer');
    expect(await permanent(retrieve()(knowledgeBase(), query(), deps()))).toContain('is not a retrieval result');
  });

  it('an answer over the size limit is permanent', async () => {
    server.enqueue({ kind: 'oversized', bytes: 64 * 1024 });
    const message = await permanent(retrieve({ maxResponseBytes: 16 * 1024 })(knowledgeBase(), query(), deps()));
    expect(message).toContain('exceeds 16384 bytes');
  });

  it('a server that never answers is a transient timeout', async () => {
    server.always({ kind: 'stall' });
    const message = await transient(retrieve({ timeoutMs: 50 })(knowledgeBase(), query(), deps()));
    expect(message).toBe('knowledge base "Product docs": the RAGFlow server did not answer within 50 ms');
  });

  it('the caller\'s abort ends a pending retrieval as transient', async () => {
    server.always({ kind: 'stall' });
    const controller = new AbortController();
    const pending = retrieve()(knowledgeBase(), query(), deps({ signal: controller.signal }));
    await server.arrived(1);
    controller.abort(new Error('turn deadline'));
    expect(await transient(pending)).toBe('knowledge base "Product docs": the retrieval was cancelled');
  });

  it('a refused connection is transient', async () => {
    const port = await closedPort();
    const message = await transient(retrieve()(knowledgeBase({ base_url: `http://127.0.0.1:${port}` }), query(), deps()));
    expect(message).toContain('ECONNREFUSED');
  });
});

describe('ragflow backend: the SSRF guard', () => {
  it('refuses a loopback or private base_url unless the guard allows it, before any connection', async () => {
    const strict = deps({ guard: new SsrfGuard() });
    expect(await permanent(retrieve()(knowledgeBase(), query(), strict))).toBe(
      'knowledge base "Product docs": outbound request refused: 127.0.0.1 is a loopback address',
    );
    expect(await permanent(retrieve()(knowledgeBase({ base_url: 'http://10.1.2.3:9380' }), query(), strict))).toBe(
      'knowledge base "Product docs": outbound request refused: 10.1.2.3 is a private address',
    );
    expect(server.requests).toHaveLength(0);
  });

  it('checks redirects too: a hop to the metadata service is refused', async () => {
    server.enqueue({ kind: 'redirect', status: 307, location: 'http://169.254.169.254/latest/meta-data/' });
    const message = await permanent(retrieve()(knowledgeBase(), query(), deps()));
    expect(message).toBe('knowledge base "Product docs": outbound request refused: 169.254.169.254 is a link-local address');
    expect(server.requests).toHaveLength(1);
  });

  it('refuses a base_url that is no URL, or carries a query', async () => {
    expect(await permanent(retrieve()(knowledgeBase({ base_url: 'ragflow.example.com' }), query(), deps()))).toContain('ragflow.base_url is not a valid URL');
    expect(await permanent(retrieve()(knowledgeBase({ base_url: `${server.baseUrl}/?x=1` }), query(), deps()))).toContain('must not carry a query');
  });
});

describe('the RAGFlow protocol server', () => {
  const post = (body: unknown, key = API_KEY) =>
    fetch(`${server.baseUrl}/api/v1/retrieval`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it.each([
    [{ question: 'x' }, '`dataset_ids` is required.'],
    [{ question: 'x', dataset_ids: DATASET }, '`dataset_ids` should be a list'],
    [{ dataset_ids: [DATASET] }, '`question` is required.'],
    [{ question: 'x', dataset_ids: [DATASET], document_ids: GUIDE }, '`documents` should be a list'],
    [{ question: 'x', dataset_ids: [DATASET], top_k: 0 }, '`top_k` must be greater than 0'],
    [{ question: 'x', dataset_ids: [DATASET], highlight: 'yes' }, '`highlight` should be a boolean'],
  ])('answers %j with RAGFlow\'s error envelope, HTTP 200', async (body, message) => {
    const res = await post(body);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ code: 102, message });
  });

  it('refuses a wrong key with RAGFlow\'s 401, and a page_size over 100 with its 500', async () => {
    const unauthorized = await post({ question: 'x', dataset_ids: [DATASET] }, 'nope');
    expect(unauthorized.status).toBe(401);
    expect(await unauthorized.json()).toEqual({ code: 401, message: UNAUTHORIZED_MESSAGE, data: null });
    expect((await post({ question: 'x', dataset_ids: [DATASET], page_size: 101 })).status).toBe(500);
  });
});
