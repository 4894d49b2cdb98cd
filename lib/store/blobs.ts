/**
 * Content-addressed blobs of a session: long strings stored once per session (by hash) and
 * referred to from turn records and checkpoints; values over one item's worth are chunked.
 */
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { decode, encode } from './codec';
import { backoff, batchGetItems, call, capacityParam, reportCapacity, type StoreContext } from './dynamo';
import { keys } from './item-keys';

/** Largest compressed attribute kept inline; larger payloads go to chunked blobs. */
const MAX_BLOB_CHUNK = 300 * 1024;

/** Writes blobs (those the session does not hold yet); returns the bytes written. */
export async function writeBlobs(ctx: StoreContext, pk: string, blobs: ReadonlyMap<string, string>): Promise<number> {
  const items: Record<string, unknown>[] = [];
  for (const [hash, text] of blobs) {
    const bytes = Buffer.from(encode(text, Number.POSITIVE_INFINITY).bytes);
    if (bytes.length <= MAX_BLOB_CHUNK) {
      items.push({ pk, sk: keys.blob(hash), kind: 'blob', d: bytes });
      continue;
    }
    const chunks = Math.ceil(bytes.length / MAX_BLOB_CHUNK);
    items.push({ pk, sk: keys.blob(hash), kind: 'blob', chunks });
    for (let i = 0; i < chunks; i++) {
      items.push({ pk, sk: keys.blobChunk(hash, i), kind: 'blob', d: bytes.subarray(i * MAX_BLOB_CHUNK, (i + 1) * MAX_BLOB_CHUNK) });
    }
  }
  let written = 0;
  for (let i = 0; i < items.length; i += 25) {
    let requests = items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } }));
    written += requests.reduce((n, r) => n + itemSize(r.PutRequest.Item), 0);
    for (let attempt = 0; requests.length > 0; attempt++) {
      const out = await call('write blobs', () => ctx.doc.send(new BatchWriteCommand({ RequestItems: { [ctx.table]: requests }, ...capacityParam(ctx) })));
      reportCapacity(ctx, 'blobs', 'write', out.ConsumedCapacity);
      requests = (out.UnprocessedItems?.[ctx.table] ?? []) as typeof requests;
      if (requests.length > 0) await backoff(attempt);
    }
  }
  return written;
}

/** Blobs a reader asked for are not there (a session damaged, an index replaced meanwhile). */
export class MissingBlobsError extends Error {
  constructor(readonly hashes: readonly string[]) {
    super(`the session is missing ${hashes.length} blob(s)`);
  }
}

/** Reads blobs by hash; a missing one is a MissingBlobsError. */
export async function readBlobs(ctx: StoreContext, pk: string, hashes: string[]): Promise<Map<string, string>> {
  const blobs = new Map<string, string>();
  const wanted = [...new Set(hashes)];
  const items = await batchGet(ctx, wanted.map((h) => ({ pk, sk: keys.blob(h) })));
  const chunked: { hash: string; chunks: number }[] = [];
  for (const item of items) {
    const hash = (item.sk as string).slice(2);
    if (typeof item.chunks === 'number') chunked.push({ hash, chunks: item.chunks });
    else blobs.set(hash, decode(item.d as Uint8Array, new Map()) as string);
  }
  for (const { hash, chunks } of chunked) {
    const parts = await batchGet(ctx, Array.from({ length: chunks }, (_, i) => ({ pk, sk: keys.blobChunk(hash, i) })));
    if (parts.length !== chunks) continue; // part of it went: as missing as the whole
    parts.sort((a, b) => String(a.sk).localeCompare(String(b.sk)));
    blobs.set(hash, decode(Buffer.concat(parts.map((p) => Buffer.from(p.d as Uint8Array))), new Map()) as string);
  }
  const missing = wanted.filter((h) => !blobs.has(h));
  if (missing.length > 0) throw new MissingBlobsError(missing);
  return blobs;
}

function batchGet(ctx: StoreContext, keysToGet: { pk: string; sk: string }[]): Promise<Record<string, unknown>[]> {
  return batchGetItems(ctx, 'read blobs', keysToGet);
}

/** Approximate DynamoDB item size: attribute names plus values. */
export function itemSize(item: Record<string, unknown>): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) size += Buffer.byteLength(name) + valueSize(value);
  return size;
}

function valueSize(value: unknown): number {
  if (value === undefined || value === null) return 1;
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (typeof value === 'number') return Math.ceil(String(value).replace(/^-/, '').replace('.', '').length / 2) + 1;
  if (typeof value === 'boolean') return 1;
  if (value instanceof Uint8Array) return value.byteLength;
  if (Array.isArray(value)) return 3 + value.reduce((n: number, v) => n + 1 + valueSize(v), 0);
  return 3 + Object.entries(value as Record<string, unknown>).reduce((n, [k, v]) => n + Buffer.byteLength(k) + 1 + valueSize(v), 0);
}


