/**
 * The knowledge service end to end on DynamoDB Local: knowledge bases validated, documents
 * uploaded, parsed (a failing one FAIL with its reason, the others DONE), indexed and retrieved —
 * full text, and hybrid with embeddings from a local /v1/embeddings server; tenant isolation;
 * remote backends through the clients passed in.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ComponentError, TransientError } from '../../lib/canvas/errors';
import { MAX_DOCUMENT_BYTES } from '../../lib/knowledge/limits';
import { createKnowledge, FULL_TEXT_ONLY_NOTE, type KnowledgeDeps } from '../../lib/knowledge/service';
import type { KnowledgeBase, RemoteRetriever, RetrievalQuery } from '../../lib/knowledge/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import type { StoreContext } from '../../lib/store/dynamo';
import { NotFoundError } from '../../lib/store/errors';
import { createDynamoClients } from '../../lib/store/setup';
import { newTenant, testStore } from '../helpers/engine';
import { type EmbeddingsServer, startEmbeddingsServer } from '../helpers/embeddings-server';

const store = testStore();
let embeddings: EmbeddingsServer;

beforeAll(async () => {
  embeddings = await startEmbeddingsServer();
});
afterAll(async () => {
  await embeddings.close();
});

function knowledge(options: Partial<KnowledgeDeps> & { withEmbeddings?: boolean } = {}) {
  return createKnowledge({
    store,
    guard: new SsrfGuard({ allow: ['127.0.0.1'] }),
    secretsFor: () => async () => undefined,
    llm: {
      ...(options.withEmbeddings !== false ? { openai: { baseUrl: embeddings.baseUrl, apiKey: 'test-key' } } : {}),
      defaultModel: 'echo',
      models: {},
      timeoutMs: 10_000,
      retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 },
    },
    ...options,
  });
}

const query = (question: string, extra: Partial<RetrievalQuery> = {}): RetrievalQuery => ({
  question,
  top_n: 8,
  top_k: 1024,
  similarity_threshold: 0.2,
  keywords_similarity_weight: 0.5,
  ...extra,
});

const text = (s: string) => new TextEncoder().encode(s);
const signal = () => new AbortController().signal;

async function partition(tenant: string, kbId: string): Promise<Record<string, unknown>[]> {
  const out = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `T#${tenant}#KB#${kbId}` } }));
  return out.Items ?? [];
}

const HANDBOOK = [
  'Refunds are paid within 14 days of the return reaching the warehouse.',
  'Shipping to Norway takes five working days with the standard carrier.',
  'The office coffee machine is descaled every Friday by facilities.',
].join('\n');

describe('knowledge bases', () => {
  it('are validated, naming the field', async () => {
    const k = knowledge();
    const tenant = newTenant();
    await expect(k.create(tenant, { name: '  ', backend: 'local' })).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringContaining('name:') });
    await expect(k.create(tenant, { name: 'x'.repeat(129), backend: 'local' })).rejects.toThrow(/name: must be at most 128/);
    await expect(k.create(tenant, { name: 'A', backend: 'local', local: { chunking: { chunk_token_num: 0 } } })).rejects.toThrow(/local\.chunking\.chunk_token_num/);
    await expect(k.create(tenant, { name: 'A', backend: 'local', local: { chunking: { overlapped_percent: 95 } } })).rejects.toThrow(/local\.chunking\.overlapped_percent: must be 0 to 90/);
    await expect(k.create(tenant, { name: 'A', backend: 'local', local: { embedding_model: 'echo' } })).rejects.toMatchObject({ code: 'invalid_request', message: expect.stringContaining('local.embedding_model') });
    await expect(knowledge({ withEmbeddings: false }).create(tenant, { name: 'A', backend: 'local', local: { embedding_model: 'openai:text-embedding-3-small' } })).rejects.toThrow(/local\.embedding_model: .*EASEL_LLM_BASE_URL/);
    await expect(k.create(tenant, { name: 'R', backend: 'ragflow', ragflow: { base_url: 'https://rf.example.com', api_key: 'ragflow-abc123', dataset_ids: ['d'] } })).rejects.toThrow(/ragflow\.api_key: must be a \{secret\.NAME\} reference/);
    await expect(k.create(tenant, { name: 'R', backend: 'ragflow', ragflow: { base_url: 'ftp://rf.example.com', api_key: '{secret.RF}', dataset_ids: ['d'] } })).rejects.toThrow(/ragflow\.base_url/);
    await expect(k.create(tenant, { name: 'B', backend: 'bedrock', bedrock: { knowledge_base_id: 'short' } })).rejects.toThrow(/bedrock\.knowledge_base_id/);
    await expect(k.create(tenant, { name: 'B', backend: 'nope' } as never)).rejects.toThrow(/backend/);
    expect((await k.list(tenant, { page: 1, page_size: 10, orderby: 'create_time', desc: true })).total).toBe(0);

    const made = await k.create(tenant, { name: 'Handbook', backend: 'local', description: 'company rules' });
    expect(made).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{32}$/), backend: 'local', local: { chunking: { chunk_token_num: 512, delimiter: '\n', overlapped_percent: 0 } } });
    expect(made.description).toBe(`company rules ${FULL_TEXT_ONLY_NOTE}`);
    await expect(k.create(tenant, { name: 'HANDBOOK', backend: 'local' })).rejects.toThrow(/name: a knowledge base named "HANDBOOK" exists already/);
    // the note is not stored: sending it back does not double it
    const updated = await k.update(tenant, made.id, { description: made.description, name: 'Rules' });
    expect(updated.description).toBe(`company rules ${FULL_TEXT_ONLY_NOTE}`);
    expect(updated.name).toBe('Rules');
    const remote = await k.create(tenant, { name: 'RF', backend: 'ragflow', ragflow: { base_url: 'https://rf.example.com', api_key: '{secret.RAGFLOW_KEY}', dataset_ids: ['d1'] } });
    expect(remote.description).toBe('');
    await expect(k.update(tenant, remote.id, { chunking: { chunk_token_num: 64 } })).rejects.toThrow(/chunking: only local/);
    const page = await k.list(tenant, { page: 1, page_size: 1, orderby: 'create_time', desc: true });
    expect(page).toMatchObject({ total: 2, items: [{ name: 'RF' }] });
  });

  it('take documents within the limits and of the supported types, local ones only', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const kb = await k.create(tenant, { name: 'Docs', backend: 'local' });
    await expect(k.upload(tenant, kb.id, { name: 'big.txt', mime_type: 'text/plain', bytes: new Uint8Array(MAX_DOCUMENT_BYTES + 1) })).rejects.toMatchObject({ code: 'payload_too_large' });
    await expect(k.upload(tenant, kb.id, { name: 'data.xyz', mime_type: 'application/octet-stream', bytes: text('x') })).rejects.toThrow(/^unsupported document type "\.xyz"; supported: .*\.txt/);
    const doc = await k.upload(tenant, kb.id, { name: 'notes.md', mime_type: 'application/octet-stream', bytes: text('# Notes\nhello') });
    expect(doc).toMatchObject({ status: 'UNSTART', mime_type: 'text/markdown', size: 13, kb_id: kb.id, id: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(await k.getDocument(tenant, kb.id, doc.id)).toEqual(doc);
    expect((await k.get(tenant, kb.id)).document_count).toBe(1);
    const remote = await k.create(tenant, { name: 'Elsewhere', backend: 'bedrock', bedrock: { knowledge_base_id: 'ABCDEFGHIJ' } });
    await expect(k.upload(tenant, remote.id, { name: 'a.txt', mime_type: 'text/plain', bytes: text('a') })).rejects.toThrow(/Amazon Bedrock/);
  });

  it('parse documents: one that fails is FAIL with its reason, the others DONE, and retrieval finds them', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const kb = await k.create(tenant, { name: 'Support', backend: 'local', local: { chunking: { chunk_token_num: 32 } } });
    const good = await k.upload(tenant, kb.id, { name: 'handbook.txt', mime_type: 'text/plain', bytes: text(HANDBOOK) });
    const bad = await k.upload(tenant, kb.id, { name: 'broken.txt', mime_type: 'text/plain', bytes: new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x08, 0x00, 0xc3, 0x28]) });
    const page = await k.upload(tenant, kb.id, { name: 'faq.html', mime_type: 'text/html', bytes: text('<html><head><title>FAQ</title></head><body><p>Warehouse opening hours are 8 to 16.</p><script>var refunds=1</script></body></html>') });
    const parsed = await k.parse(tenant, kb.id, [good.id, bad.id, page.id]);
    expect(parsed.map((d) => d.status)).toEqual(['DONE', 'FAIL', 'DONE']);
    expect(parsed[1]!.progress_msg).toBe('the file is binary, not text');
    expect(parsed[0]).toMatchObject({ progress: 1, chunk_count: expect.any(Number) });
    expect(parsed[0]!.chunk_count).toBeGreaterThan(1);
    expect(await k.getDocument(tenant, kb.id, bad.id)).toMatchObject({ status: 'FAIL', progress_msg: parsed[1]!.progress_msg });
    const after = await k.get(tenant, kb.id);
    expect(after.chunk_count).toBe(parsed[0]!.chunk_count + parsed[2]!.chunk_count);
    expect(after.token_count).toBe(parsed[0]!.token_count + parsed[2]!.token_count);

    const run = k.forTenant(tenant);
    const { found } = await run.resolve(['support']);
    const result = await run.retrieve(found, query('when are refunds paid', { highlight: true }), signal());
    expect(result.chunks[0]).toMatchObject({ doc_id: good.id, docnm_kwd: 'handbook.txt', kb_id: kb.id, vector_similarity: 0 });
    expect(result.chunks[0]!.content_with_weight).toContain('Refunds are paid within 14 days');
    expect(result.chunks[0]!.highlight).toContain('<em>Refunds</em>');
    expect(result.doc_aggs[0]).toMatchObject({ doc_id: good.id, doc_name: 'handbook.txt' });
    // the script's text was not indexed
    const warehouse = await run.retrieve(found, query('warehouse opening hours'), signal());
    expect(warehouse.chunks[0]!.doc_id).toBe(page.id);

    const chunks = await k.listChunks(tenant, kb.id, good.id, { page: 1, page_size: 100 });
    expect(chunks.total).toBe(parsed[0]!.chunk_count);
    expect(chunks.items.map((c) => c.index)).toEqual([...chunks.items.keys()]);
    expect(chunks.items.every((c) => c.token_count <= 32 && c.document_id === good.id)).toBe(true);

    // deleting a document takes its chunks out of the index
    await k.deleteDocuments(tenant, kb.id, [good.id]);
    const gone = await run.retrieve(found, query('when are refunds paid'), signal());
    expect(gone.chunks.map((c) => c.doc_id)).not.toContain(good.id);
    await expect(k.getDocument(tenant, kb.id, good.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('retrieve hybrid with an embedding model: a question near a chunk it shares no word with', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const model = 'openai:fake-embed';
    const a = await k.create(tenant, { name: 'Fleet', backend: 'local', local: { embedding_model: model, chunking: { chunk_token_num: 24 } } });
    const b = await k.create(tenant, { name: 'Finance', backend: 'local', local: { embedding_model: model } });
    expect(a.description).toBe('');
    const fleet = await k.upload(tenant, a.id, { name: 'fleet.txt', mime_type: 'text/plain', bytes: text('Every car is serviced twice a year at the depot.\nThe canteen serves lunch at noon.') });
    await k.upload(tenant, b.id, { name: 'money.txt', mime_type: 'text/plain', bytes: text('Reimbursement claims go to the finance team.') });
    const before = embeddings.requests.length;
    await k.parse(tenant, a.id, [fleet.id]);
    const parsedRequests = embeddings.requests.slice(before);
    expect(parsedRequests.every((r) => r.model === 'fake-embed' && r.authorization === 'Bearer test-key')).toBe(true);
    expect(parsedRequests.flatMap((r) => r.input)).toHaveLength((await k.get(tenant, a.id)).chunk_count);

    const run = k.forTenant(tenant);
    const kbs = (await run.resolve([a.id, b.id])).found;
    // by words alone nothing matches "automobile"
    const words = await knowledge().forTenant(tenant).retrieve(kbs, query('automobile maintenance', { keywords_similarity_weight: 1 }), signal());
    expect(words.chunks).toEqual([]);
    const asked = embeddings.requests.length;
    const result = await run.retrieve(kbs, query('automobile maintenance', { keywords_similarity_weight: 0.3 }), signal());
    // the question is embedded once for both knowledge bases
    expect(embeddings.requests.slice(asked)).toEqual([expect.objectContaining({ input: ['automobile maintenance'] })]);
    expect(result.chunks[0]).toMatchObject({ doc_id: fleet.id, term_similarity: 0 });
    expect(result.chunks[0]!.content_with_weight).toContain('Every car is serviced');
    expect(result.chunks[0]!.vector_similarity).toBeGreaterThan(0.5);
    expect(result.chunks[0]!.similarity).toBeCloseTo(0.7 * result.chunks[0]!.vector_similarity, 5);
  });

  it('refuse to search knowledge bases of different embedding models together, and an embedding model failing fails the document', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const a = await k.create(tenant, { name: 'One', backend: 'local', local: { embedding_model: 'openai:model-one' } });
    const b = await k.create(tenant, { name: 'Two', backend: 'local', local: { embedding_model: 'openai:model-two' } });
    const c = await k.create(tenant, { name: 'Plain', backend: 'local' });
    const run = k.forTenant(tenant);
    const err = await run.retrieve([a, b], query('x'), signal()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ComponentError);
    expect((err as Error).message).toBe('Knowledge bases use different embedding models.');
    // a full-text-only knowledge base goes with any
    await expect(run.retrieve([a, c], query('x'), signal())).resolves.toMatchObject({ chunks: [] });

    const doc = await k.upload(tenant, a.id, { name: 'a.txt', mime_type: 'text/plain', bytes: text('hello there') });
    embeddings.failNext(1, 400);
    const [failed] = await k.parse(tenant, a.id, [doc.id]);
    expect(failed).toMatchObject({ status: 'FAIL', progress_msg: expect.stringMatching(/^embedding failed: .*400/) });
    // the embedding model cannot change under chunks, and can while there are none
    const [done] = await k.parse(tenant, a.id, [doc.id]);
    expect(done!.status).toBe('DONE');
    await expect(k.update(tenant, a.id, { embedding_model: null })).rejects.toThrow(/embedding_model: cannot be changed/);
    await k.deleteDocuments(tenant, a.id, [doc.id]);
    expect((await k.update(tenant, a.id, { embedding_model: null })).description).toBe(FULL_TEXT_ONLY_NOTE);
  });

  it('search remote backends through the clients given, merged with local results by similarity', async () => {
    const tenant = newTenant();
    const seen: { kb: string; top_n: number; secret?: string }[] = [];
    const ragflow: RemoteRetriever = async (kb, q, deps) => {
      seen.push({ kb: kb.id, top_n: q.top_n, secret: await deps.secret('RF_KEY') });
      return {
        chunks: [0.6, 0.1].map((similarity, i) => ({
          chunk_id: `rf${i}`, content_with_weight: `remote ${i}`, doc_id: 'rfdoc', docnm_kwd: 'remote.pdf', kb_id: kb.id, important_kwd: [], image_id: '',
          similarity, vector_similarity: similarity, term_similarity: similarity, positions: [], doc_type_kwd: '',
        })),
        doc_aggs: [{ doc_id: 'rfdoc', doc_name: 'remote.pdf', count: 2 }],
        total: 2,
      };
    };
    const k = knowledge({ remote: { ragflow }, secretsFor: (t) => async (name) => (t === tenant && name === 'RF_KEY' ? 'the-key' : undefined) });
    const rf = await k.create(tenant, { name: 'RF', backend: 'ragflow', ragflow: { base_url: 'https://rf.example.com', api_key: '{secret.RF_KEY}', dataset_ids: ['d1'] } });
    const local = await k.create(tenant, { name: 'Local', backend: 'local' });
    const doc = await k.upload(tenant, local.id, { name: 'h.txt', mime_type: 'text/plain', bytes: text(HANDBOOK) });
    await k.parse(tenant, local.id, [doc.id]);
    const result = await k.forTenant(tenant).retrieve([rf, local], query('refunds paid warehouse', { top_n: 2, similarity_threshold: 0.05 }), signal());
    expect(seen).toEqual([{ kb: rf.id, top_n: 2, secret: 'the-key' }]);
    // the local chunk has every word of the question (similarity 1), the remote's best 0.6
    expect(result.chunks.map((c) => [c.doc_id, c.similarity])).toEqual([[doc.id, 1], ['rfdoc', 0.6]]);
    const localOnly = await k.forTenant(tenant).retrieve([local], query('refunds paid warehouse', { top_n: 2, similarity_threshold: 0.05 }), signal());
    expect(result.total).toBe(localOnly.total + 2);
    expect(result.doc_aggs).toEqual(expect.arrayContaining([{ doc_id: 'rfdoc', doc_name: 'remote.pdf', count: 2 }, expect.objectContaining({ doc_id: doc.id })]));

    // page 2 of one: the second best overall
    const second = await k.forTenant(tenant).retrieve([rf, local], query('refunds paid warehouse', { top_n: 1, page: 2, similarity_threshold: 0.05 }), signal());
    expect(second.chunks.map((c) => c.chunk_id)).toEqual(['rf0']);
    expect(seen.at(-1)).toMatchObject({ top_n: 2 });

    const bedrock = await k.create(tenant, { name: 'BR', backend: 'bedrock', bedrock: { knowledge_base_id: 'ABCDEFGHIJ' } });
    await expect(k.forTenant(tenant).retrieve([bedrock], query('x'), signal())).rejects.toThrow(new ComponentError('knowledge base "BR" is on Amazon Bedrock, and this deployment has no Amazon Bedrock client'));
  });

  it('answer for the RAGFlow datasets they search: a migrated template\'s dataset ids resolve to them unchanged', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const ragflow = { base_url: 'https://rf.example.com', api_key: '{secret.RF_KEY}' };
    const rf = await k.create(tenant, { name: 'Manuals', backend: 'ragflow', ragflow: { ...ragflow, dataset_ids: ['65cb5150819b11f08347047c16ec874f', '65cb5150819b11f08347047c16ec874f', 'a5aaec4a819b11f095f1047c16ec874f'] } });
    expect(rf.aliases).toEqual(['65cb5150819b11f08347047c16ec874f', 'a5aaec4a819b11f095f1047c16ec874f']);
    const resolved = await k.forTenant(tenant).resolve(['a5aaec4a819b11f095f1047c16ec874f', '65cb5150819b11f08347047c16ec874f']);
    expect(resolved).toMatchObject({ found: [{ id: rf.id }], missing: [] });
    // aliases given, even none, are kept as given: another knowledge base may search the same dataset
    const second = await k.create(tenant, { name: 'Manuals (copy)', aliases: [], backend: 'ragflow', ragflow: { ...ragflow, dataset_ids: ['a5aaec4a819b11f095f1047c16ec874f'] } });
    expect(second.aliases).toEqual([]);
    // and another tenant's datasets are not this tenant's
    expect(await k.forTenant(newTenant()).resolve(['a5aaec4a819b11f095f1047c16ec874f'])).toEqual({ found: [], missing: ['a5aaec4a819b11f095f1047c16ec874f'] });
  });

  it('keep tenants apart: another tenant\'s ids are missing everywhere', async () => {
    const k = knowledge();
    const owner = newTenant();
    const other = newTenant();
    const kb = await k.create(owner, { name: 'Private', backend: 'local', aliases: ['legacy-id'] });
    const doc = await k.upload(owner, kb.id, { name: 'p.txt', mime_type: 'text/plain', bytes: text('secret plans for the launch') });
    await k.parse(owner, kb.id, [doc.id]);
    const calls: [string, () => Promise<unknown>][] = [
      ['get', () => k.get(other, kb.id)],
      ['update', () => k.update(other, kb.id, { name: 'Mine' })],
      ['delete', () => k.delete(other, kb.id)],
      ['upload', () => k.upload(other, kb.id, { name: 'x.txt', mime_type: 'text/plain', bytes: text('x') })],
      ['listDocuments', () => k.listDocuments(other, kb.id, { page: 1, page_size: 10, orderby: 'create_time', desc: false })],
      ['getDocument', () => k.getDocument(other, kb.id, doc.id)],
      ['deleteDocuments', () => k.deleteDocuments(other, kb.id, [doc.id])],
      ['parse', () => k.parse(other, kb.id, [doc.id])],
      ['listChunks', () => k.listChunks(other, kb.id, doc.id, { page: 1, page_size: 10 })],
    ];
    for (const [name, call] of calls) {
      const error = await call().then(() => undefined, (e: unknown) => e);
      expect(error, name).toBeInstanceOf(NotFoundError);
    }
    expect((await k.list(other, { page: 1, page_size: 10, orderby: 'create_time', desc: false })).total).toBe(0);
    const resolved = await k.forTenant(other).resolve([kb.id, 'Private', 'legacy-id']);
    expect(resolved).toEqual({ found: [], missing: [kb.id, 'Private', 'legacy-id'] });
    await expect(k.forTenant(other).retrieve([kb], query('launch plans'), signal())).rejects.toBeInstanceOf(ComponentError);
    // and the owner still has it all
    expect((await k.forTenant(owner).retrieve([kb], query('launch plans'), signal())).chunks).toHaveLength(1);
  });

  it('delete with every chunk and index blob of the partition, the name free again', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const kb = await k.create(tenant, { name: 'Temporary', backend: 'local', aliases: ['tmp'] });
    const doc = await k.upload(tenant, kb.id, { name: 'h.txt', mime_type: 'text/plain', bytes: text(HANDBOOK) });
    await k.parse(tenant, kb.id, [doc.id]);
    const kinds = (await partition(tenant, kb.id)).map((i) => String(i.sk).slice(0, 2));
    expect(kinds).toEqual(expect.arrayContaining(['B#', 'C#', 'D#', 'KB', 'R#']));
    await k.delete(tenant, kb.id);
    expect(await partition(tenant, kb.id)).toEqual([]);
    await expect(k.get(tenant, kb.id)).rejects.toBeInstanceOf(NotFoundError);
    expect((await k.forTenant(tenant).resolve(['tmp', 'temporary'])).found).toEqual([]);
    await k.create(tenant, { name: 'temporary', backend: 'local', aliases: ['tmp'] });
  });
});

describe('the local index', () => {
  it('stays current under concurrent parses, with no chunks of overtaken runs left', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const kb = await k.create(tenant, { name: 'Busy', backend: 'local', local: { chunking: { chunk_token_num: 16 } } });
    const docs = await Promise.all(['alpha', 'bravo', 'charlie', 'delta'].map((word) =>
      k.upload(tenant, kb.id, { name: `${word}.txt`, mime_type: 'text/plain', bytes: text(`${word} report line one\n${word} report line two\n${word} closing words`) }),
    ));
    // the same documents twice at once, and each on its own, all racing
    await Promise.all([
      k.parse(tenant, kb.id, docs.map((d) => d.id)),
      k.parse(tenant, kb.id, docs.map((d) => d.id)),
      ...docs.map((d) => k.parse(tenant, kb.id, [d.id])),
    ]);
    const items = await partition(tenant, kb.id);
    const head = items.find((i) => i.sk === 'KB')!;
    expect(head.index_version).toBe(head.docs_version);
    const listed = await k.listDocuments(tenant, kb.id, { page: 1, page_size: 10, orderby: 'create_time', desc: false });
    expect(listed.items.every((d) => d.status === 'DONE')).toBe(true);
    const chunkItems = items.filter((i) => String(i.sk).startsWith('C#'));
    const expected = listed.items.reduce((n, d) => n + d.chunk_count, 0);
    expect(chunkItems).toHaveLength(expected);
    expect(head.chunk_count).toBe(expected);
    // at most one index blob: each replaced one went. Two builds that swap the pointer at once
    // may delete the blob the other just pointed at; the first search then rebuilds it (below)
    const blobsOf = (all: Record<string, unknown>[]) => new Set(all.filter((i) => String(i.sk).startsWith('B#')).map((i) => String(i.sk).slice(2, 66)));
    expect(blobsOf(items).size).toBeLessThanOrEqual(1);
    const run = knowledge().forTenant(tenant);
    for (const word of ['alpha', 'bravo', 'charlie', 'delta']) {
      const result = await run.retrieve([kb], query(`${word} closing`), signal());
      expect(result.chunks[0]!.content_with_weight, word).toContain(`${word} closing words`);
    }
    // once searched, the index is current and in exactly one blob, the one the pointer names
    const after = await partition(tenant, kb.id);
    const pointer = after.find((i) => i.sk === 'KB')!;
    expect(pointer.index_version).toBe(pointer.docs_version);
    expect([...blobsOf(after)]).toEqual([pointer.index_hash]);
  });

  it('is read once per process and served from its cache after', async () => {
    const reads: string[] = [];
    const counting: StoreContext = { ...store, onCapacity: (operation) => reads.push(operation) };
    const writer = knowledge();
    const tenant = newTenant();
    const kb = await writer.create(tenant, { name: 'Cached', backend: 'local' });
    const doc = await writer.upload(tenant, kb.id, { name: 'h.txt', mime_type: 'text/plain', bytes: text(HANDBOOK) });
    await writer.parse(tenant, kb.id, [doc.id]);
    const reader = knowledge({ store: counting }).forTenant(tenant);
    const first = await reader.retrieve([kb], query('coffee machine'), signal());
    expect(reads.filter((r) => r === 'read blobs')).toHaveLength(1);
    const second = await reader.retrieve([kb], query('coffee machine'), signal());
    expect(reads.filter((r) => r === 'read blobs')).toHaveLength(1);
    expect(second).toEqual(first);
    // a new index (another hash) is read again
    const more = await writer.upload(tenant, kb.id, { name: 'more.txt', mime_type: 'text/plain', bytes: text('The coffee beans come from Kenya.') });
    await writer.parse(tenant, kb.id, [more.id]);
    const third = await reader.retrieve([kb], query('coffee kenya'), signal());
    expect(reads.filter((r) => r === 'read blobs')).toHaveLength(2);
    expect(third.chunks[0]!.doc_id).toBe(more.id);
  });

  it('is rebuilt from the chunks when its blob is lost, or when a parse died before rebuilding', async () => {
    let clock = Date.parse('2026-03-01T00:00:00Z');
    const now = () => clock;
    const k = knowledge({ now });
    const tenant = newTenant();
    const kb = await k.create(tenant, { name: 'Repair', backend: 'local' });
    const doc = await k.upload(tenant, kb.id, { name: 'h.txt', mime_type: 'text/plain', bytes: text(HANDBOOK) });
    await k.parse(tenant, kb.id, [doc.id]);
    const pk = `T#${tenant}#KB#${kb.id}`;
    const { deleteKeys } = await import('../../lib/store/partitions');
    await deleteKeys(store, (await partition(tenant, kb.id)).filter((i) => String(i.sk).startsWith('B#')).map((i) => ({ pk, sk: String(i.sk) })));
    const fresh = knowledge({ now }).forTenant(tenant);
    expect((await fresh.retrieve([kb], query('coffee machine'), signal())).chunks).toHaveLength(1);

    // a parse that committed its chunks and died before the rebuild
    const { startParse, writeChunks, finishParse } = await import('../../lib/store/knowledge-documents');
    const late = await k.upload(tenant, kb.id, { name: 'late.txt', mime_type: 'text/plain', bytes: text('x') });
    const started = await startParse(store, tenant, kb.id, late.id, 'dead', new Date(clock).toISOString());
    await writeChunks(store, tenant, kb.id, 'dead', [{ id: 'e'.repeat(32), doc_id: late.id, index: 0, content: 'The zeppelin hangar opens at dawn.', token_count: 8, pages: [], important_kwd: [], available: true }]);
    await finishParse(store, tenant, started, 'dead', { status: 'DONE', chunk_count: 1, token_count: 8, message: '' }, { at: new Date(clock).toISOString(), maxChunks: 100 });
    const reader = knowledge({ now }).forTenant(tenant);
    expect((await reader.retrieve([kb], query('zeppelin hangar'), signal())).chunks).toEqual([]);
    clock += 16 * 60_000;
    expect((await reader.retrieve([kb], query('zeppelin hangar'), signal())).chunks[0]!.doc_id).toBe(late.id);
  });
});

describe('a store that does not answer', () => {
  it('fails resolution and retrieval as transient: the turn commits nothing and is retried', async () => {
    const { doc } = createDynamoClients({ endpoint: 'http://127.0.0.1:9' });
    const k = knowledge({ store: { doc, table: 'nowhere' } });
    const tenant = newTenant();
    await expect(k.forTenant(tenant).resolve(['anything'])).rejects.toBeInstanceOf(TransientError);
    const kb = { id: 'a'.repeat(32), tenant, name: 'x', description: '', aliases: [], document_count: 0, chunk_count: 0, token_count: 0, created_at: '', updated_at: '', backend: 'local', local: { chunking: { chunk_token_num: 512, delimiter: '\n', overlapped_percent: 0 } } } as KnowledgeBase;
    await expect(k.forTenant(tenant).retrieve([kb], query('x'), signal())).rejects.toBeInstanceOf(TransientError);
    doc.destroy();
  });
});

describe('a knowledge base deleted under a run', () => {
  it('fails the retrieval as a component error', async () => {
    const k = knowledge();
    const tenant = newTenant();
    const kb: KnowledgeBase = await k.create(tenant, { name: 'Short-lived', backend: 'local' });
    await k.delete(tenant, kb.id);
    await expect(k.forTenant(tenant).retrieve([kb], query('anything'), signal())).rejects.toThrow(new ComponentError('knowledge base "Short-lived" was deleted'));
  });
});
