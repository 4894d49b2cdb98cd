/**
 * The `bedrock` backend — the real AWS SDK client, SigV4 signing, HTTP/2 — against a local
 * server that speaks the Agent Runtime's Retrieve: the request as the service reads it,
 * the answer mapped to the retriever's chunks, every failure classified, credentials kept out
 * of errors, and the SDK loaded only when a retrieval needs it.
 */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { build, type Metafile } from 'esbuild';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ComponentError, TransientError } from '../../lib/canvas/errors';
import { type BedrockRetrieverOptions, createBedrockRetriever, fileName } from '../../lib/knowledge/bedrock';
import type { BedrockSettings, KnowledgeBase, RetrievalQuery, RetrieverDeps } from '../../lib/knowledge/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { BedrockKbServer, type KbDocument } from '../helpers/bedrock-kb-server';

const KB_ID = 'KB12345678';
const ACCESS_KEY_ID = 'AKIAEASELTESTFAKE0002';
const SECRET = 'sEcReT/EaselFakeKbSecretAccessKey+0123456789';
const SESSION_TOKEN = 'FwoGZXIvYXdzEaselFakeKbSessionToken//////////wEaDNotARealTokenAtAll==';

const GUIDE_URI = 's3://acme-docs/manuals/Getting%20started.pdf';
const DOCUMENTS: KbDocument[] = [
  {
    text: 'A retrieval engine ranks chunks by similarity to the question.',
    location: { type: 'S3', s3Location: { uri: GUIDE_URI } },
    metadata: { 'x-amz-bedrock-kb-chunk-id': '1%3A0%3AmccQM5EBxA6rr6aO09_T', 'x-amz-bedrock-kb-source-uri': GUIDE_URI, team: 'search' },
  },
  {
    text: 'Every retrieval engine needs an index.',
    location: { type: 'S3', s3Location: { uri: GUIDE_URI } },
    metadata: { team: 'search' },
  },
  {
    text: 'The engine room of the ship is below deck.',
    location: { type: 'WEB', webLocation: { url: 'https://example.com/ships/engine-room' } },
    metadata: { team: 'boats' },
  },
  {
    text: 'Bananas are rich in potassium.',
    location: { type: 'CUSTOM', customDocumentLocation: { id: 'fruit-facts' } },
  },
];

let server: BedrockKbServer;
const thrown: unknown[] = [];

beforeAll(async () => {
  server = await BedrockKbServer.start({
    [KB_ID]: DOCUMENTS,
    ROWS000001: [
      { text: '', location: { type: 'SQL', sqlLocation: { query: 'SELECT name, price FROM products' } }, row: [{ columnName: 'name', columnValue: 'retrieval engine', type: 'STRING' }, { columnName: 'price', columnValue: '42', type: 'NUMBER' }] },
    ],
  });
});
afterAll(async () => {
  await server.close();
  const seen = thrown.map((e) => `${String(e)} ${JSON.stringify(e)}`).join('\n');
  expect(thrown.length).toBeGreaterThan(8);
  for (const secret of [SECRET, SESSION_TOKEN]) expect(seen).not.toContain(secret);
});
beforeEach(() => server.reset());

function knowledgeBase(bedrock: Partial<BedrockSettings> = {}): KnowledgeBase {
  return {
    id: '2c26b46b68ffc68ff99b453c1d304134',
    tenant: 'acme',
    name: 'Manuals',
    description: '',
    aliases: [],
    document_count: 0,
    chunk_count: 0,
    token_count: 0,
    created_at: '2025-01-01T00:00:00.000Z',
    updated_at: '2025-01-01T00:00:00.000Z',
    backend: 'bedrock',
    bedrock: { knowledge_base_id: KB_ID, ...bedrock },
  };
}

function query(overrides: Partial<RetrievalQuery> = {}): RetrievalQuery {
  return { question: 'retrieval engine chunks', top_n: 8, top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5, ...overrides };
}

function deps(overrides: Partial<RetrieverDeps> = {}): RetrieverDeps {
  return { signal: new AbortController().signal, secret: () => undefined, guard: new SsrfGuard(), ...overrides };
}

function retriever(overrides: Partial<BedrockRetrieverOptions> = {}) {
  return createBedrockRetriever({
    region: 'us-east-1',
    endpoint: server.endpoint,
    credentials: { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET, sessionToken: SESSION_TOKEN },
    timeoutMs: 10_000,
    ...overrides,
  });
}

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

async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

const WHERE = `knowledge base "Manuals" (Bedrock ${KB_ID})`;

describe('bedrock backend: the request', () => {
  it('POSTs /knowledgebases/{id}/retrieve, SigV4-signed for bedrock in the region, with the query and top_n', async () => {
    await retriever()(knowledgeBase(), query(), deps());
    expect(server.requests).toHaveLength(1);
    const [request] = server.requests;
    expect(request).toMatchObject({ method: 'POST', path: `/knowledgebases/${KB_ID}/retrieve`, knowledgeBaseId: KB_ID, region: 'us-east-1' });
    expect(request!.headers.authorization).toMatch(new RegExp(`^AWS4-HMAC-SHA256 Credential=${ACCESS_KEY_ID}/\\d{8}/us-east-1/bedrock/aws4_request`));
    expect(request!.headers['x-amz-security-token']).toBe(SESSION_TOKEN);
    expect(request!.body).toEqual({
      retrievalQuery: { text: 'retrieval engine chunks' },
      retrievalConfiguration: { vectorSearchConfiguration: { numberOfResults: 8 } },
    });
  });

  it('passes the knowledge base\'s filter as it is, and Bedrock applies it', async () => {
    const filter = { andAll: [{ equals: { key: 'team', value: 'search' } }, { startsWith: { key: 'x-amz-bedrock-kb-source-uri', value: 's3://acme-docs/' } }] };
    const result = await retriever()(knowledgeBase({ filter }), query({ similarity_threshold: 0 }), deps());
    expect(server.requests[0]!.body.retrievalConfiguration.vectorSearchConfiguration).toEqual({ numberOfResults: 8, filter });
    expect(result.chunks.map((c) => c.content_with_weight)).toEqual([DOCUMENTS[0]!.text]);
  });

  it('signs for the knowledge base\'s own region, else the retriever\'s', async () => {
    const retrieve = retriever();
    await retrieve(knowledgeBase(), query(), deps());
    await retrieve(knowledgeBase({ region: 'eu-west-1' }), query(), deps());
    await retrieve(knowledgeBase(), query(), deps());
    expect(server.requests.map((r) => r.region)).toEqual(['us-east-1', 'eu-west-1', 'us-east-1']);
  });

  it('asks for page * top_n results and keeps the page', async () => {
    const all = await retriever()(knowledgeBase(), query({ top_n: 3, similarity_threshold: 0 }), deps());
    const second = await retriever()(knowledgeBase(), query({ top_n: 1, page: 2, similarity_threshold: 0 }), deps());
    expect(server.requests[1]!.body.retrievalConfiguration.vectorSearchConfiguration.numberOfResults).toBe(2);
    expect(second.chunks).toEqual([all.chunks[1]]);
    expect(second.total).toBe(2);
  });

  it('never asks for more than Bedrock\'s 100 results', async () => {
    await retriever()(knowledgeBase(), query({ top_n: 60, page: 3 }), deps());
    expect(server.requests[0]!.body.retrievalConfiguration.vectorSearchConfiguration.numberOfResults).toBe(100);
  });
});

describe('bedrock backend: the answer', () => {
  it('maps results to chunks: the text, the location as the document, the score as the similarity', async () => {
    const result = await retriever()(knowledgeBase(), query(), deps());
    expect(result.total).toBe(3);
    const [first, second, third] = result.chunks;
    expect(first).toEqual({
      chunk_id: '1%3A0%3AmccQM5EBxA6rr6aO09_T',
      content_with_weight: DOCUMENTS[0]!.text,
      doc_id: expect.stringMatching(/^[0-9a-f]{32}$/),
      docnm_kwd: 'Getting started.pdf',
      kb_id: '2c26b46b68ffc68ff99b453c1d304134',
      important_kwd: [],
      image_id: '',
      similarity: 1,
      vector_similarity: 1,
      term_similarity: 0,
      positions: [],
      doc_type_kwd: '',
      url: GUIDE_URI,
    });
    // the same location is the same document; a chunk without Bedrock's id gets a stable hash
    expect(second!.similarity).toBeCloseTo(2 / 3, 10);
    expect(second!.doc_id).toBe(first!.doc_id);
    expect(second!.chunk_id).toMatch(/^[0-9a-f]{32}$/);
    expect(third).toMatchObject({ docnm_kwd: 'engine-room', url: 'https://example.com/ships/engine-room' });
    expect(third!.similarity).toBeCloseTo(1 / 3, 10);
    // the bananas scored 0, below the threshold
    expect(result.chunks.some((c) => c.content_with_weight.includes('Bananas'))).toBe(false);
    expect(result.doc_aggs).toEqual([
      { doc_name: 'Getting started.pdf', doc_id: first!.doc_id, count: 2 },
      { doc_name: 'engine-room', doc_id: third!.doc_id, count: 1 },
    ]);

    const again = await retriever()(knowledgeBase(), query(), deps());
    expect(again.chunks.map((c) => [c.chunk_id, c.doc_id])).toEqual(result.chunks.map((c) => [c.chunk_id, c.doc_id]));
  });

  it('names custom documents by their id, and reads a structured row as column: value lines', async () => {
    const custom = await retriever()(knowledgeBase(), query({ question: 'bananas potassium', similarity_threshold: 0.5 }), deps());
    expect(custom.chunks).toHaveLength(1);
    expect(custom.chunks[0]).toMatchObject({ docnm_kwd: 'fruit-facts', similarity: 1 });
    expect(custom.chunks[0]!.url).toBeUndefined();

    const rows = await retriever()(knowledgeBase({ knowledge_base_id: 'ROWS000001' }), query({ question: 'retrieval engine' }), deps());
    expect(rows.chunks[0]).toMatchObject({ content_with_weight: 'name: retrieval engine\nprice: 42', docnm_kwd: 'SQL query' });
  });

  it('keeps only the documents asked for, and asks nothing when none is', async () => {
    const all = await retriever()(knowledgeBase(), query(), deps());
    const guide = all.chunks[0]!.doc_id;
    const only = await retriever()(knowledgeBase(), query({ doc_ids: [guide] }), deps());
    expect(only.chunks.map((c) => c.doc_id)).toEqual([guide, guide]);
    expect(only.total).toBe(2);
    server.reset();
    expect(await retriever()(knowledgeBase(), query({ doc_ids: [] }), deps())).toEqual({ chunks: [], doc_aggs: [], total: 0 });
    expect(server.requests).toHaveLength(0);
  });

  it('takes a file name from the URI\'s last segment, decoded', () => {
    expect(fileName('s3://bucket/docs/Annual%20report.pdf')).toBe('Annual report.pdf');
    expect(fileName('https://example.com/')).toBe('example.com');
    expect(fileName('https://example.com/a/b/')).toBe('b');
  });
});

describe('bedrock backend: failures', () => {
  it.each([
    [429, 'ThrottlingException', 'Rate exceeded'],
    [400, 'ServiceQuotaExceededException', 'Quota exceeded for concurrent Retrieve requests'],
    [500, 'InternalServerException', 'Internal server error'],
    [503, 'ServiceUnavailableException', 'Service unavailable'],
    [502, 'BadGatewayException', 'Bad gateway'],
    [504, 'SomethingNewException', 'Gateway timeout'],
  ])('HTTP %i %s is transient', async (status, errorType, message) => {
    server.enqueue({ kind: 'error', status, errorType, message });
    expect(await transient(retriever()(knowledgeBase(), query(), deps()))).toContain(`${WHERE}: Bedrock is unavailable (`);
  });

  it('a knowledge base id Bedrock does not accept is its ValidationException, permanent', async () => {
    const message = await permanent(retriever()(knowledgeBase({ knowledge_base_id: 'not-an-id!' }), query(), deps()));
    expect(message).toMatch(/^knowledge base "Manuals" \(Bedrock not-an-id!\): Bedrock refused the request \(ValidationException: 1 validation error detected: Value 'not-an-id!' at 'knowledgeBaseId'/);
  });

  it('a knowledge base that does not exist is permanent and names it and the region', async () => {
    const message = await permanent(retriever()(knowledgeBase({ knowledge_base_id: 'MISSING123', region: 'eu-west-1' }), query(), deps()));
    expect(message).toBe(
      'knowledge base "Manuals" (Bedrock MISSING123): no knowledge base MISSING123 in eu-west-1 (ResourceNotFoundException: Knowledge base with id MISSING123 does not exist)',
    );
  });

  it('denied access is permanent and says which permission is missing', async () => {
    server.enqueue({ kind: 'error', status: 403, errorType: 'AccessDeniedException', message: 'User is not authorized to perform: bedrock:Retrieve' });
    expect(await permanent(retriever()(knowledgeBase(), query(), deps()))).toBe(
      `${WHERE}: access was denied; the role needs bedrock:Retrieve on the knowledge base (AccessDeniedException: User is not authorized to perform: bedrock:Retrieve)`,
    );
  });

  it('refused credentials are permanent, and a secret the service echoes is redacted', async () => {
    server.enqueue({ kind: 'error', status: 403, errorType: 'UnrecognizedClientException', message: `The security token ${SESSION_TOKEN} is invalid (${SECRET})` });
    const message = await permanent(retriever()(knowledgeBase(), query(), deps()));
    expect(message).toContain(`${WHERE}: the AWS credentials were refused (UnrecognizedClientException: The security token [redacted] is invalid ([redacted]))`);
  });

  it('an answer that is not JSON is permanent', async () => {
    server.enqueue({ kind: 'raw', body: '<html>not json</html>' });
    expect(await permanent(retriever()(knowledgeBase(), query(), deps()))).toBe(`${WHERE}: Bedrock's answer could not be read (HTTP 200, SyntaxError)`);
  });

  it('a service that never answers is a transient timeout', async () => {
    server.always({ kind: 'stall' });
    expect(await transient(retriever({ timeoutMs: 50 })(knowledgeBase(), query(), deps()))).toBe(`${WHERE}: Bedrock did not answer within 50 ms`);
  });

  it('the caller\'s abort ends a pending retrieval as transient', async () => {
    server.always({ kind: 'stall' });
    const controller = new AbortController();
    const pending = retriever()(knowledgeBase(), query(), deps({ signal: controller.signal }));
    await server.arrived(1);
    controller.abort(new Error('turn deadline'));
    expect(await transient(pending)).toBe(`${WHERE}: the retrieval was cancelled`);
  });

  it('an endpoint nobody listens on is a transient network error', async () => {
    const port = await closedPort();
    const message = await transient(retriever({ endpoint: `http://127.0.0.1:${port}` })(knowledgeBase(), query(), deps()));
    expect(message).toContain(`${WHERE}: network error reaching Bedrock`);
  });
});

describe('bedrock backend: loading', () => {
  it('loads the Agent Runtime SDK only through a dynamic import, so a bundle initialises it on first use', async () => {
    const root = join(import.meta.dirname, '../..');
    const { metafile } = await build({
      entryPoints: [join(root, 'lib/knowledge/bedrock.ts')],
      absWorkingDir: root,
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      outdir: join(root, '.probe-out'),
      logLevel: 'silent',
    });
    const { inputs } = metafile as Metafile;
    const sdk = '@aws-sdk/client-bedrock-agent-runtime';
    // what loading lib/knowledge/bedrock.ts evaluates: its static imports, transitively
    const atInit = new Set(['lib/knowledge/bedrock.ts']);
    for (const module of atInit) for (const i of inputs[module]!.imports) if (!i.external && i.kind !== 'dynamic-import') atInit.add(i.path);
    const importers = Object.keys(inputs).filter((module) => inputs[module]!.imports.some((i) => i.path === sdk));
    expect(importers).toEqual(['lib/knowledge/bedrock-sdk.ts']);
    expect([...atInit].filter((module) => importers.includes(module))).toEqual([]);
    expect(inputs['lib/knowledge/bedrock.ts']!.imports).toContainEqual({ path: 'lib/knowledge/bedrock-sdk.ts', kind: 'dynamic-import', original: './bedrock-sdk' });
  });
});
