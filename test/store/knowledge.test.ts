/**
 * Knowledge base items on DynamoDB Local: knowledge bases with unique names and aliases, their
 * documents, chunks of parse runs and index pointer; tenant isolation; deletion that leaves
 * nothing behind; no item with a TTL.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import type { KnowledgeBase, KnowledgeDocument } from '../../lib/knowledge/types';
import { cascadeRemovedHeads } from '../../lib/store/cleanup';
import { NotFoundError } from '../../lib/store/errors';
import {
  createKnowledgeBase,
  deleteKnowledgeBase,
  getKnowledgeBase,
  KnowledgeNameTakenError,
  listKnowledgeBases,
  resolveKnowledgeBases,
  updateKnowledgeBase,
} from '../../lib/store/knowledge';
import {
  deleteDocuments,
  finishParse,
  getDocument,
  KnowledgeLimitError,
  listDocumentChunks,
  listDocuments,
  ParseSupersededError,
  putDocument,
  readDocumentBytes,
  readKnowledgeChunks,
  startParse,
  type StoredChunk,
  writeChunks,
} from '../../lib/store/knowledge-documents';
import { readIndex, swapIndex } from '../../lib/store/knowledge-index';
import { newTenant, testStore } from '../helpers/engine';

const store = testStore();
let counter = 0;
const hex = (n: number) => n.toString(16).padStart(32, '0');
const newId = () => hex(Date.now() * 1000 + counter++);
const AT = '2026-01-01T00:00:00.000Z';

function localKb(tenant: string, name: string, extra: Partial<KnowledgeBase> = {}): KnowledgeBase {
  return {
    id: newId(),
    tenant,
    name,
    description: '',
    aliases: [],
    document_count: 0,
    chunk_count: 0,
    token_count: 0,
    created_at: AT,
    updated_at: AT,
    backend: 'local',
    local: { chunking: { chunk_token_num: 128, delimiter: '\n', overlapped_percent: 0 } },
    ...extra,
  } as KnowledgeBase;
}

function newDoc(kbId: string, name = 'a.txt'): KnowledgeDocument {
  return { id: newId(), kb_id: kbId, name, size: 0, mime_type: 'text/plain', sha256: '', status: 'UNSTART', progress: 0, progress_msg: '', chunk_count: 0, token_count: 0, created_at: AT, updated_at: AT };
}

function chunks(docId: string, n: number, dims = 0): StoredChunk[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `${docId.slice(0, 24)}${String(i).padStart(8, '0')}`,
    doc_id: docId,
    index: i,
    content: `chunk ${i} of ${docId}`,
    token_count: 5,
    pages: [i + 1],
    important_kwd: [],
    available: true,
    ...(dims > 0 ? { vector: Float32Array.from({ length: dims }, (_, k) => (i + 1) * 0.5 + k / 7) } : {}),
  }));
}

async function partition(tenant: string, kbId: string): Promise<Record<string, unknown>[]> {
  const out = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `T#${tenant}#KB#${kbId}` } }));
  return out.Items ?? [];
}

async function itemAt(pk: string): Promise<Record<string, unknown>[]> {
  const out = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk } }));
  return out.Items ?? [];
}

describe('knowledge bases in the store', () => {
  it('round-trip, list oldest first, and keep names unique whatever their case', async () => {
    const tenant = newTenant();
    const a = localKb(tenant, 'Handbook', { aliases: ['ragflow-ds-1'] });
    const b = { ...localKb(tenant, 'Remote'), backend: 'ragflow', ragflow: { base_url: 'https://rf.example.com', api_key: '{secret.RF}', dataset_ids: ['d1'] } } as KnowledgeBase;
    await createKnowledgeBase(store, a);
    await createKnowledgeBase(store, { ...b, created_at: '2026-01-02T00:00:00.000Z' });
    expect((await getKnowledgeBase(store, tenant, a.id)).kb).toEqual(a);
    expect((await getKnowledgeBase(store, tenant, b.id)).kb).toMatchObject({ backend: 'ragflow', ragflow: { api_key: '{secret.RF}', dataset_ids: ['d1'] } });
    expect((await listKnowledgeBases(store, tenant)).map((s) => s.kb.name)).toEqual(['Handbook', 'Remote']);

    await expect(createKnowledgeBase(store, localKb(tenant, 'HANDBOOK'))).rejects.toThrow(KnowledgeNameTakenError);
    await expect(createKnowledgeBase(store, localKb(tenant, 'Other', { aliases: ['ragflow-ds-1'] }))).rejects.toMatchObject({ code: 'invalid_request', field: 'aliases' });
    // the failed transactions wrote nothing
    expect(await listKnowledgeBases(store, tenant)).toHaveLength(2);
    // another tenant may use the same name
    await createKnowledgeBase(store, localKb(newTenant(), 'Handbook'));
    // nothing of a knowledge base expires
    for (const item of [...(await partition(tenant, a.id)), ...(await itemAt(`T#${tenant}#KBN#handbook`)), ...(await itemAt(`T#${tenant}#KBA#ragflow-ds-1`))]) {
      expect(item.ttl).toBeUndefined();
    }
  });

  it('resolve ids, then aliases, then names, each once, in the order asked; another tenant\'s are missing', async () => {
    const tenant = newTenant();
    const other = newTenant();
    const a = localKb(tenant, 'Alpha', { aliases: ['legacy-a'] });
    const b = localKb(tenant, 'Beta');
    const foreign = localKb(other, 'Gamma', { aliases: ['legacy-g'] });
    for (const kb of [a, b, foreign]) await createKnowledgeBase(store, kb);
    const { found, missing } = await resolveKnowledgeBases(store, tenant, ['beta', a.id, 'legacy-a', 'Alpha', foreign.id, 'Gamma', 'legacy-g', 'nope']);
    expect(found.map((s) => s.kb.id)).toEqual([b.id, a.id]);
    expect(missing).toEqual([foreign.id, 'Gamma', 'legacy-g', 'nope']);
    await expect(getKnowledgeBase(store, tenant, foreign.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(deleteKnowledgeBase(store, tenant, foreign.id)).rejects.toBeInstanceOf(NotFoundError);
    // an id wins over a name that looks the same
    const named = localKb(tenant, b.id);
    await createKnowledgeBase(store, named);
    expect((await resolveKnowledgeBases(store, tenant, [b.id])).found.map((s) => s.kb.id)).toEqual([b.id]);
  });

  it('move the name and alias items with a rename, freeing the old ones', async () => {
    const tenant = newTenant();
    const a = localKb(tenant, 'Old', { aliases: ['x', 'y'] });
    await createKnowledgeBase(store, a);
    await createKnowledgeBase(store, localKb(tenant, 'Taken'));
    await expect(updateKnowledgeBase(store, a, { name: 'taken' }, AT)).rejects.toMatchObject({ field: 'name' });
    await updateKnowledgeBase(store, a, { name: 'New', aliases: ['y', 'z'], description: 'd' }, '2026-01-03T00:00:00.000Z');
    const { kb } = await getKnowledgeBase(store, tenant, a.id);
    expect(kb).toMatchObject({ name: 'New', aliases: ['y', 'z'], description: 'd', updated_at: '2026-01-03T00:00:00.000Z' });
    const resolved = await resolveKnowledgeBases(store, tenant, ['old', 'x', 'new', 'z']);
    expect(resolved.missing).toEqual(['old', 'x']);
    await createKnowledgeBase(store, localKb(tenant, 'OLD', { aliases: ['x'] }));
  });

  it('store documents with their bytes, count them, and refuse past the limit', async () => {
    const tenant = newTenant();
    const kb = localKb(tenant, 'Docs');
    await createKnowledgeBase(store, kb);
    const bytes = new Uint8Array(700 * 1024).map((_, i) => i % 251);
    const doc = { ...newDoc(kb.id, 'big.txt'), size: bytes.length };
    const stored = await putDocument(store, tenant, doc, bytes, 2);
    expect(stored.parts).toBe(3);
    expect(Buffer.compare(await readDocumentBytes(store, tenant, await getDocument(store, tenant, kb.id, doc.id)), Buffer.from(bytes))).toBe(0);
    await putDocument(store, tenant, newDoc(kb.id, 'b.txt'), new Uint8Array([65]), 2);
    const third = newDoc(kb.id, 'c.txt');
    await expect(putDocument(store, tenant, third, new Uint8Array([66]), 2)).rejects.toBeInstanceOf(KnowledgeLimitError);
    // the refused document left no bytes behind
    expect((await partition(tenant, kb.id)).filter((i) => String(i.sk).includes(third.id))).toEqual([]);
    expect((await getKnowledgeBase(store, tenant, kb.id)).kb.document_count).toBe(2);
    expect((await listDocuments(store, tenant, kb.id)).map((d) => d.doc.name).sort()).toEqual(['b.txt', 'big.txt']);
    await expect(putDocument(store, newTenant(), newDoc(kb.id), new Uint8Array([1]), 2)).rejects.toBeInstanceOf(NotFoundError);
    await expect(getDocument(store, newTenant(), kb.id, doc.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('count a parse run\'s chunks only once it commits, and let the latest run win', async () => {
    const tenant = newTenant();
    const kb = localKb(tenant, 'Runs');
    await createKnowledgeBase(store, kb);
    const doc = newDoc(kb.id);
    await putDocument(store, tenant, doc, new Uint8Array([1]), 10);

    const first = await startParse(store, tenant, kb.id, doc.id, 'run1', AT);
    await writeChunks(store, tenant, kb.id, 'run1', chunks(doc.id, 3, 4));
    // written, not committed: nothing counts yet
    expect((await readKnowledgeChunks(store, tenant, kb.id)).chunks).toEqual([]);
    const second = await startParse(store, tenant, kb.id, doc.id, 'run2', AT);
    await writeChunks(store, tenant, kb.id, 'run2', chunks(doc.id, 2, 4));
    await expect(finishParse(store, tenant, first, 'run1', { status: 'DONE', chunk_count: 3, token_count: 15, message: 'ok' }, { at: AT, maxChunks: 100 })).rejects.toBeInstanceOf(ParseSupersededError);
    const done = await finishParse(store, tenant, second, 'run2', { status: 'DONE', chunk_count: 2, token_count: 10, message: 'ok' }, { at: AT, maxChunks: 100 });
    expect(done.doc).toMatchObject({ status: 'DONE', chunk_count: 2, progress: 1 });

    const source = await readKnowledgeChunks(store, tenant, kb.id);
    expect(source.chunks.map((c) => c.index)).toEqual([0, 1]);
    const expected = chunks(doc.id, 2, 4);
    expect(source.chunks[1]!.vector).toEqual(expected[1]!.vector);
    expect(source.chunks[1]).toMatchObject({ content: expected[1]!.content, pages: [2], token_count: 5 });
    expect(await listDocumentChunks(store, tenant, await getDocument(store, tenant, kb.id, doc.id))).toHaveLength(2);
    // the overtaken run's chunks are gone
    expect((await partition(tenant, kb.id)).filter((i) => String(i.sk).startsWith('C#'))).toHaveLength(2);
    const after = await getKnowledgeBase(store, tenant, kb.id);
    expect(after.kb).toMatchObject({ chunk_count: 2, token_count: 10 });
    expect(after.docsVersion).toBe(1);

    // a failed re-parse leaves the document without chunks, and the counts follow
    const third = await startParse(store, tenant, kb.id, doc.id, 'run3', AT);
    expect(third.doc.chunk_count).toBe(2);
    const failed = await finishParse(store, tenant, third, 'run3', { status: 'FAIL', message: 'the file is not UTF-8 text' }, { at: AT, maxChunks: 100 });
    expect(failed.doc).toMatchObject({ status: 'FAIL', progress_msg: 'the file is not UTF-8 text', chunk_count: 0 });
    expect((await getKnowledgeBase(store, tenant, kb.id)).kb).toMatchObject({ chunk_count: 0, token_count: 0 });
    expect((await partition(tenant, kb.id)).filter((i) => String(i.sk).startsWith('C#'))).toEqual([]);
  });

  it('refuse a commit that would pass the chunk limit, dropping its chunks', async () => {
    const tenant = newTenant();
    const kb = localKb(tenant, 'Full');
    await createKnowledgeBase(store, kb);
    const doc = newDoc(kb.id);
    await putDocument(store, tenant, doc, new Uint8Array([1]), 10);
    const started = await startParse(store, tenant, kb.id, doc.id, 'r', AT);
    await writeChunks(store, tenant, kb.id, 'r', chunks(doc.id, 4));
    await expect(finishParse(store, tenant, started, 'r', { status: 'DONE', chunk_count: 4, token_count: 20, message: 'ok' }, { at: AT, maxChunks: 3 })).rejects.toBeInstanceOf(KnowledgeLimitError);
    expect((await partition(tenant, kb.id)).filter((i) => String(i.sk).startsWith('C#'))).toEqual([]);
  });

  it('move the index pointer only for the chunks it was built from, and drop the index it replaces', async () => {
    const tenant = newTenant();
    const kb = localKb(tenant, 'Index');
    await createKnowledgeBase(store, kb);
    const pointer = (hash: string, version: number) => ({ hash, version, bytes: 5, chunks: 0, builtAt: AT });
    const h1 = 'a'.repeat(64);
    const h2 = 'b'.repeat(64);
    expect(await swapIndex(store, tenant, kb.id, pointer(h1, 0), 'one')).toBe('swapped');
    expect(await readIndex(store, tenant, kb.id, h1)).toBe('one');
    // a build for a version that is not the current one is refused
    expect(await swapIndex(store, tenant, kb.id, pointer(h2, 7), 'two')).toBe('stale');
    expect((await getKnowledgeBase(store, tenant, kb.id)).index?.hash).toBe(h1);
    const doc = newDoc(kb.id);
    await putDocument(store, tenant, doc, new Uint8Array([1]), 10);
    const started = await startParse(store, tenant, kb.id, doc.id, 'r', AT);
    await finishParse(store, tenant, started, 'r', { status: 'DONE', chunk_count: 0, token_count: 0, message: '' }, { at: AT, maxChunks: 10 });
    expect(await swapIndex(store, tenant, kb.id, pointer(h2, 1), 'x'.repeat(400_000))).toBe('swapped');
    expect(await readIndex(store, tenant, kb.id, h1)).toBeUndefined();
    expect(await readIndex(store, tenant, kb.id, h2)).toBe('x'.repeat(400_000));
    expect((await getKnowledgeBase(store, tenant, kb.id)).index).toMatchObject({ hash: h2, version: 1 });
    await expect(readIndex(store, newTenant(), kb.id, h2)).resolves.toBeUndefined();
  });

  it('delete a knowledge base with its whole partition, name and aliases; a document with its bytes and chunks', async () => {
    const tenant = newTenant();
    const kb = localKb(tenant, 'Gone', { aliases: ['g1'] });
    await createKnowledgeBase(store, kb);
    const keep = newDoc(kb.id, 'keep.txt');
    const drop = newDoc(kb.id, 'drop.txt');
    for (const doc of [keep, drop]) {
      await putDocument(store, tenant, doc, new Uint8Array(400 * 1024), 10);
      const started = await startParse(store, tenant, kb.id, doc.id, 'r', AT);
      await writeChunks(store, tenant, kb.id, 'r', chunks(doc.id, 3, 8));
      await finishParse(store, tenant, started, 'r', { status: 'DONE', chunk_count: 3, token_count: 15, message: '' }, { at: AT, maxChunks: 100 });
    }
    await swapIndex(store, tenant, kb.id, { hash: 'c'.repeat(64), version: 2, bytes: 1, chunks: 6, builtAt: AT }, 'y'.repeat(700_000));

    await deleteDocuments(store, tenant, kb.id, [drop.id], AT);
    const left = await partition(tenant, kb.id);
    expect(left.filter((i) => String(i.sk).includes(drop.id))).toEqual([]);
    expect(left.filter((i) => String(i.sk).includes(keep.id))).toHaveLength(1 + 2 + 3); // item, 2 parts, 3 chunks
    const counted = await getKnowledgeBase(store, tenant, kb.id);
    expect(counted.kb).toMatchObject({ document_count: 1, chunk_count: 3, token_count: 15 });
    expect(counted.docsVersion).toBe(3);
    await expect(deleteDocuments(store, tenant, kb.id, ['f'.repeat(32)], AT)).rejects.toBeInstanceOf(NotFoundError);

    await deleteKnowledgeBase(store, tenant, kb.id);
    expect(await partition(tenant, kb.id)).toEqual([]);
    expect(await itemAt(`T#${tenant}#KBN#gone`)).toEqual([]);
    expect(await itemAt(`T#${tenant}#KBA#g1`)).toEqual([]);
    await expect(getKnowledgeBase(store, tenant, kb.id)).rejects.toBeInstanceOf(NotFoundError);
    expect(await listKnowledgeBases(store, tenant)).toEqual([]);
    await expect(deleteKnowledgeBase(store, tenant, kb.id)).rejects.toBeInstanceOf(NotFoundError);
    // the name is free again
    await createKnowledgeBase(store, localKb(tenant, 'gone', { aliases: ['g1'] }));
  });

  it('are swept by the stream cleanup when their item goes with stragglers left', async () => {
    const tenant = newTenant();
    const kb = localKb(tenant, 'Straggler');
    await createKnowledgeBase(store, kb);
    await deleteKnowledgeBase(store, tenant, kb.id);
    // a parse still in flight wrote after the deletion
    await writeChunks(store, tenant, kb.id, 'late', chunks('d'.repeat(32), 2));
    const pk = `T#${tenant}#KB#${kb.id}`;
    expect(await cascadeRemovedHeads(store, [{ id: 'r1', pk, sk: 'KB' }])).toEqual({ failed: [], deleted: 2 });
    expect(await partition(tenant, kb.id)).toEqual([]);
  });
});
