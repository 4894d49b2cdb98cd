/**
 * Documents of a knowledge base and their chunks, in the knowledge base's partition: a document
 * item `D#<doc>` (status, progress, counts), its bytes in parts `R#<doc>#<i>` (each under 300 KB),
 * and the chunks of each parse run `C#<doc>#<run>#<i>`. A parse writes its chunks under a run id
 * of its own, then commits: the document item names the run whose chunks count, and the knowledge
 * base's counts and `docs_version` move in the same transaction. So a parse that another one
 * overtook (or a deletion) fails its commit and sweeps its own chunks, and readers never see a
 * half-written set.
 */
import { BatchWriteCommand, GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { EaselError } from '../errors';
import type { DocumentStatus, KnowledgeDocument } from '../knowledge/types';
import { backoff, call, capacityParam, ConditionFailed, queryAll, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { KNOWLEDGE_BASE_SK, KNOWLEDGE_CHUNK_PREFIX, KNOWLEDGE_DOCUMENT_PREFIX, keys } from './item-keys';
import { deleteKeys } from './partitions';

/** Bytes of a document per item: well under DynamoDB's 400 KB. */
const DOCUMENT_PART_BYTES = 300 * 1024;

/** One chunk as stored. */
export interface StoredChunk {
  id: string;
  doc_id: string;
  /** Position in its document, from 0. */
  index: number;
  content: string;
  token_count: number;
  pages: number[];
  important_kwd: string[];
  available: boolean;
  /** The chunk's embedding, when the knowledge base has an embedding model. */
  vector?: Float32Array;
}

/** A document as stored: what clients see, and which parse run's chunks are its own. */
export interface StoredDocument {
  doc: KnowledgeDocument;
  /** The run whose chunks count; absent: none (not parsed, or failed). */
  chunkRun?: string;
  /** The parse in flight or last started. */
  parseRun?: string;
  parts: number;
}

/** The knowledge base is full: its limit on documents or chunks would be passed. */
export class KnowledgeLimitError extends EaselError {
  constructor(message: string) {
    super('payload_too_large', message);
  }
}

/** Another parse of the document started after this one (or the document went): its result does not count. */
export class ParseSupersededError extends Error {
  constructor() {
    super('another parse of the document started meanwhile');
  }
}

const kbKey = (tenant: string, kbId: string) => ({ pk: keys.knowledgeBase(tenant, kbId), sk: KNOWLEDGE_BASE_SK });
const LIVE_KB = 'attribute_exists(pk) AND attribute_not_exists(deleting)';

/**
 * Stores a new document (status UNSTART) with its bytes, and counts it in its knowledge base.
 * NotFoundError when the knowledge base is gone; KnowledgeLimitError when it holds `maxDocuments`.
 */
export async function putDocument(ctx: StoreContext, tenant: string, doc: KnowledgeDocument, bytes: Uint8Array, maxDocuments: number): Promise<StoredDocument> {
  const pk = keys.knowledgeBase(tenant, doc.kb_id);
  const parts = Math.max(1, Math.ceil(bytes.length / DOCUMENT_PART_BYTES));
  const partItems = Array.from({ length: parts }, (_, i) => ({
    pk,
    sk: keys.knowledgeDocumentBytes(doc.id, i),
    kind: 'knowledge_document_part',
    d: Buffer.from(bytes.subarray(i * DOCUMENT_PART_BYTES, (i + 1) * DOCUMENT_PART_BYTES)),
  }));
  // the bytes first: a document item is only ever written with all of its bytes in place
  await putItems(ctx, 'store the document', partItems);
  try {
    const written = await call('store the document', () =>
      ctx.doc.send(new TransactWriteCommand({
        ...capacityParam(ctx),
        TransactItems: [
          {
            Update: {
              TableName: ctx.table,
              Key: kbKey(tenant, doc.kb_id),
              UpdateExpression: 'ADD document_count :one SET updated_at = :u',
              ConditionExpression: `${LIVE_KB} AND (attribute_not_exists(document_count) OR document_count < :max)`,
              ExpressionAttributeValues: { ':one': 1, ':u': doc.updated_at, ':max': maxDocuments },
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          { Put: { TableName: ctx.table, Item: documentItem(pk, doc, parts), ConditionExpression: 'attribute_not_exists(pk)' } },
        ],
      })),
    );
    reportCapacity(ctx, 'store the document', 'write', written.ConsumedCapacity);
  } catch (error) {
    await deleteKeys(ctx, partItems.map((i) => ({ pk, sk: i.sk })));
    if (error instanceof ConditionFailed && error.index === 0) {
      if (!error.item || error.item.deleting) throw new NotFoundError('knowledge base');
      throw new KnowledgeLimitError(`the knowledge base holds ${maxDocuments} documents, the most it may; delete some or use another knowledge base`);
    }
    throw error;
  }
  return { doc, parts };
}

export async function getDocument(ctx: StoreContext, tenant: string, kbId: string, docId: string): Promise<StoredDocument> {
  const { Item } = await call('read the document', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.knowledgeBase(tenant, kbId), sk: keys.knowledgeDocument(docId) }, ConsistentRead: true })),
  );
  if (!Item) throw new NotFoundError('document');
  return fromDocumentItem(Item);
}

/** Every document of the knowledge base, oldest first. */
export async function listDocuments(ctx: StoreContext, tenant: string, kbId: string): Promise<StoredDocument[]> {
  const items = await queryAll(ctx, 'list the documents', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :d)',
    ExpressionAttributeValues: { ':pk': keys.knowledgeBase(tenant, kbId), ':d': KNOWLEDGE_DOCUMENT_PREFIX },
    ConsistentRead: true,
  }, 'list the documents');
  return items.map(fromDocumentItem).sort((a, b) => a.doc.created_at.localeCompare(b.doc.created_at) || a.doc.id.localeCompare(b.doc.id));
}

export async function readDocumentBytes(ctx: StoreContext, tenant: string, stored: StoredDocument): Promise<Buffer> {
  const items = await queryAll(ctx, 'read the document', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :r)',
    ExpressionAttributeValues: { ':pk': keys.knowledgeBase(tenant, stored.doc.kb_id), ':r': `R#${stored.doc.id}#` },
    ConsistentRead: true,
  });
  if (items.length !== stored.parts) throw new NotFoundError('document');
  return Buffer.concat(items.map((i) => Buffer.from(i.d as Uint8Array)));
}

/**
 * Marks the document RUNNING under a new parse run; answers it as it is now (its counts are
 * those of the chunks that still count until this run commits).
 */
export async function startParse(ctx: StoreContext, tenant: string, kbId: string, docId: string, run: string, at: string): Promise<StoredDocument> {
  try {
    const out = await call('start parsing the document', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk: keys.knowledgeBase(tenant, kbId), sk: keys.knowledgeDocument(docId) },
        UpdateExpression: 'SET #s = :s, progress = :p, progress_msg = :m, parse_run = :run, updated_at = :u',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#s': 'status' },
        ExpressionAttributeValues: { ':s': 'RUNNING' satisfies DocumentStatus, ':p': 0, ':m': 'parsing', ':run': run, ':u': at },
        ReturnValues: 'ALL_NEW',
      })),
    );
    return fromDocumentItem(out.Attributes ?? {});
  } catch (error) {
    if (error instanceof ConditionFailed) throw new NotFoundError('document');
    throw error;
  }
}

/** Writes a parse run's chunks (not yet counted: `finishParse` commits them). */
export async function writeChunks(ctx: StoreContext, tenant: string, kbId: string, run: string, chunks: readonly StoredChunk[]): Promise<void> {
  const pk = keys.knowledgeBase(tenant, kbId);
  await putItems(ctx, 'store the chunks', chunks.map((c) => chunkItem(pk, run, c)));
}

export type ParseOutcome =
  | { status: 'DONE'; chunk_count: number; token_count: number; message: string }
  | { status: 'FAIL'; message: string };

/**
 * Commits a parse run: the document takes its outcome (DONE: this run's chunks count; FAIL:
 * none do), the knowledge base its counts and a new `docs_version`, in one transaction. Then
 * the chunks of every other run of the document are deleted. ParseSupersededError when another
 * run started since (its chunks are deleted instead); NotFoundError when the knowledge base
 * went; KnowledgeLimitError when the chunks would pass `maxChunks` (the run's chunks are deleted,
 * the caller records the failure).
 */
export async function finishParse(
  ctx: StoreContext,
  tenant: string,
  started: StoredDocument,
  run: string,
  outcome: ParseOutcome,
  options: { at: string; maxChunks: number },
): Promise<StoredDocument> {
  const { doc } = started;
  const pk = keys.knowledgeBase(tenant, doc.kb_id);
  const chunks = outcome.status === 'DONE' ? outcome.chunk_count : 0;
  const tokens = outcome.status === 'DONE' ? outcome.token_count : 0;
  // the counts this run replaces: those of the chunks that counted when it started
  const chunkDelta = chunks - doc.chunk_count;
  const tokenDelta = tokens - doc.token_count;
  const names = { '#s': 'status' };
  const docValues: Record<string, unknown> = {
    ':s': outcome.status,
    ':p': 1,
    ':m': outcome.message,
    ':c': chunks,
    ':t': tokens,
    ':u': options.at,
    ':run': run,
  };
  const chunkRun = outcome.status === 'DONE' ? ', chunk_run = :run' : '';
  try {
    const written = await call('commit the parse', () =>
      ctx.doc.send(new TransactWriteCommand({
        ...capacityParam(ctx),
        TransactItems: [
          {
            Update: {
              TableName: ctx.table,
              Key: { pk, sk: keys.knowledgeDocument(doc.id) },
              UpdateExpression: `SET #s = :s, progress = :p, progress_msg = :m, chunk_count = :c, token_count = :t, updated_at = :u${chunkRun}${outcome.status === 'DONE' ? '' : ' REMOVE chunk_run'}`,
              ConditionExpression: 'attribute_exists(pk) AND parse_run = :run',
              ExpressionAttributeNames: names,
              ExpressionAttributeValues: docValues,
            },
          },
          {
            Update: {
              TableName: ctx.table,
              Key: kbKey(tenant, doc.kb_id),
              UpdateExpression: 'ADD docs_version :one, chunk_count :dc, token_count :dt SET updated_at = :u',
              ConditionExpression: `${LIVE_KB}${chunkDelta > 0 ? ' AND (attribute_not_exists(chunk_count) OR chunk_count <= :limit)' : ''}`,
              ExpressionAttributeValues: { ':one': 1, ':dc': chunkDelta, ':dt': tokenDelta, ':u': options.at, ...(chunkDelta > 0 ? { ':limit': options.maxChunks - chunkDelta } : {}) },
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
        ],
      })),
    );
    reportCapacity(ctx, 'commit the parse', 'write', written.ConsumedCapacity);
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    await deleteChunkRuns(ctx, tenant, doc.kb_id, doc.id, (r) => r === run);
    if (error.index === 1) {
      if (!error.item || error.item.deleting) throw new NotFoundError('knowledge base');
      throw new KnowledgeLimitError(`the knowledge base would hold more than ${options.maxChunks} chunks, the most it may`);
    }
    throw new ParseSupersededError();
  }
  await deleteChunkRuns(ctx, tenant, doc.kb_id, doc.id, (r) => r !== run || outcome.status !== 'DONE');
  const after: KnowledgeDocument = { ...doc, status: outcome.status, progress: 1, progress_msg: outcome.message, chunk_count: chunks, token_count: tokens, updated_at: options.at };
  return { doc: after, parts: started.parts, parseRun: run, ...(outcome.status === 'DONE' ? { chunkRun: run } : {}) };
}

/**
 * Deletes documents with their bytes and chunks; each leaves its knowledge base's counts in the
 * same transaction. NotFoundError (and nothing deleted) when one is missing.
 */
export async function deleteDocuments(ctx: StoreContext, tenant: string, kbId: string, docIds: readonly string[], at: string): Promise<void> {
  const pk = keys.knowledgeBase(tenant, kbId);
  const docs = await Promise.all([...new Set(docIds)].map((id) => getDocument(ctx, tenant, kbId, id)));
  for (const { doc } of docs) {
    for (let attempt = 0; ; attempt++) {
      const current = attempt === 0 ? doc : (await getDocument(ctx, tenant, kbId, doc.id).catch(() => undefined))?.doc;
      if (!current) break;
      try {
        const written = await call('delete the document', () =>
          ctx.doc.send(new TransactWriteCommand({
            ...capacityParam(ctx),
            TransactItems: [
              {
                Delete: {
                  TableName: ctx.table,
                  Key: { pk, sk: keys.knowledgeDocument(current.id) },
                  // a parse that commits meanwhile changes the counts: read them again
                  ConditionExpression: 'attribute_exists(pk) AND chunk_count = :c AND token_count = :t',
                  ExpressionAttributeValues: { ':c': current.chunk_count, ':t': current.token_count },
                },
              },
              {
                Update: {
                  TableName: ctx.table,
                  Key: kbKey(tenant, kbId),
                  UpdateExpression: 'ADD docs_version :one, document_count :minusOne, chunk_count :dc, token_count :dt SET updated_at = :u',
                  ConditionExpression: LIVE_KB,
                  ExpressionAttributeValues: { ':one': 1, ':minusOne': -1, ':dc': -current.chunk_count, ':dt': -current.token_count, ':u': at },
                },
              },
            ],
          })),
        );
        reportCapacity(ctx, 'delete the document', 'write', written.ConsumedCapacity);
        break;
      } catch (error) {
        if (!(error instanceof ConditionFailed)) throw error;
        if (error.index === 1) throw new NotFoundError('knowledge base');
        if (attempt >= 5) throw new EaselError('unavailable', 'the document kept changing while it was deleted; try again');
      }
    }
    const rest = await queryAll(ctx, 'delete the document', {
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :r)',
      ExpressionAttributeValues: { ':pk': pk, ':r': `R#${doc.id}#` },
      ProjectionExpression: 'pk, sk',
    });
    await deleteKeys(ctx, rest.map((i) => ({ pk, sk: i.sk as string })));
    await deleteChunkRuns(ctx, tenant, kbId, doc.id, () => true);
  }
}

/** The chunks of a document that count, in order. */
export async function listDocumentChunks(ctx: StoreContext, tenant: string, stored: StoredDocument): Promise<StoredChunk[]> {
  if (!stored.chunkRun) return [];
  const items = await queryAll(ctx, 'list the chunks', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :c)',
    ExpressionAttributeValues: { ':pk': keys.knowledgeBase(tenant, stored.doc.kb_id), ':c': keys.knowledgeChunkRun(stored.doc.id, stored.chunkRun) },
    ConsistentRead: true,
  });
  return items.map(fromChunkItem);
}

/**
 * Every chunk that counts in the knowledge base, with the documents they are of. Read the
 * knowledge base's `docsVersion` before: a commit after it makes that version stale, and
 * `swapIndex` refuses an index built for a stale version.
 */
export async function readKnowledgeChunks(ctx: StoreContext, tenant: string, kbId: string): Promise<{ docs: StoredDocument[]; chunks: StoredChunk[] }> {
  const docs = await listDocuments(ctx, tenant, kbId);
  const counted = new Map(docs.filter((d) => d.chunkRun).map((d) => [d.doc.id, d.chunkRun as string]));
  const items = await queryAll(ctx, 'read the chunks', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :c)',
    ExpressionAttributeValues: { ':pk': keys.knowledgeBase(tenant, kbId), ':c': KNOWLEDGE_CHUNK_PREFIX },
    ConsistentRead: true,
  }, 'read the chunks');
  const chunks = items
    .filter((i) => {
      const [, docId, run] = (i.sk as string).split('#');
      return docId !== undefined && counted.get(docId) === run;
    })
    .map(fromChunkItem);
  return { docs, chunks };
}

async function deleteChunkRuns(ctx: StoreContext, tenant: string, kbId: string, docId: string, which: (run: string) => boolean): Promise<void> {
  const pk = keys.knowledgeBase(tenant, kbId);
  const items = await queryAll(ctx, 'delete the chunks', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :c)',
    ExpressionAttributeValues: { ':pk': pk, ':c': `${KNOWLEDGE_CHUNK_PREFIX}${docId}#` },
    ProjectionExpression: 'pk, sk',
  });
  await deleteKeys(ctx, items.filter((i) => which((i.sk as string).split('#')[2] ?? '')).map((i) => ({ pk, sk: i.sk as string })));
}

async function putItems(ctx: StoreContext, what: string, items: Record<string, unknown>[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25) {
    let requests = items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } }));
    for (let attempt = 0; requests.length > 0; attempt++) {
      const out = await call(what, () => ctx.doc.send(new BatchWriteCommand({ RequestItems: { [ctx.table]: requests }, ...capacityParam(ctx) })));
      reportCapacity(ctx, what, 'write', out.ConsumedCapacity);
      requests = (out.UnprocessedItems?.[ctx.table] ?? []) as typeof requests;
      if (requests.length > 0) await backoff(attempt);
    }
  }
}

function documentItem(pk: string, doc: KnowledgeDocument, parts: number): Record<string, unknown> {
  return {
    pk,
    sk: keys.knowledgeDocument(doc.id),
    kind: 'knowledge_document',
    id: doc.id,
    kb_id: doc.kb_id,
    name: doc.name,
    size: doc.size,
    mime_type: doc.mime_type,
    sha256: doc.sha256,
    status: doc.status,
    progress: doc.progress,
    progress_msg: doc.progress_msg,
    chunk_count: doc.chunk_count,
    token_count: doc.token_count,
    created_at: doc.created_at,
    updated_at: doc.updated_at,
    parts,
  };
}

function fromDocumentItem(item: Record<string, unknown>): StoredDocument {
  return {
    doc: {
      id: item.id as string,
      kb_id: item.kb_id as string,
      name: item.name as string,
      size: item.size as number,
      mime_type: item.mime_type as string,
      sha256: item.sha256 as string,
      status: item.status as DocumentStatus,
      progress: (item.progress as number | undefined) ?? 0,
      progress_msg: (item.progress_msg as string | undefined) ?? '',
      chunk_count: (item.chunk_count as number | undefined) ?? 0,
      token_count: (item.token_count as number | undefined) ?? 0,
      created_at: item.created_at as string,
      updated_at: item.updated_at as string,
    },
    parts: (item.parts as number | undefined) ?? 1,
    ...(typeof item.chunk_run === 'string' ? { chunkRun: item.chunk_run } : {}),
    ...(typeof item.parse_run === 'string' ? { parseRun: item.parse_run } : {}),
  };
}

function chunkItem(pk: string, run: string, c: StoredChunk): Record<string, unknown> {
  return {
    pk,
    sk: keys.knowledgeChunk(c.doc_id, run, c.index),
    kind: 'knowledge_chunk',
    id: c.id,
    doc_id: c.doc_id,
    idx: c.index,
    content: c.content,
    tokens: c.token_count,
    pages: c.pages,
    important_kwd: c.important_kwd,
    available: c.available,
    // little-endian float32, 4 bytes a dimension (a JSON list would take ~3 times as much)
    ...(c.vector ? { v: Buffer.from(c.vector.buffer, c.vector.byteOffset, c.vector.byteLength) } : {}),
  };
}

function fromChunkItem(item: Record<string, unknown>): StoredChunk {
  const v = item.v as Uint8Array | undefined;
  return {
    id: item.id as string,
    doc_id: item.doc_id as string,
    index: item.idx as number,
    content: item.content as string,
    token_count: (item.tokens as number | undefined) ?? 0,
    pages: (item.pages as number[] | undefined) ?? [],
    important_kwd: (item.important_kwd as string[] | undefined) ?? [],
    available: item.available !== false,
    // copied: the SDK's buffer may not be aligned for a Float32Array view
    ...(v ? { vector: new Float32Array(new Uint8Array(v).buffer) } : {}),
  };
}
