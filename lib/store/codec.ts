/**
 * Stored payloads: JSON, with every long string moved out into a content-addressed blob (so a
 * large value is written once, however many turns carry it), then compressed: brotli, or for
 * turn records deflate with a preset dictionary of the words records repeat (record-dictionary.ts),
 * which halves a typical record. A blob reference is an object with a single NUL-prefixed key,
 * which no JSON the engine produces has.
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, constants, deflateRawSync, inflateRawSync } from 'node:zlib';
import { RECORD_DICTIONARY_V1 } from './record-dictionary';

/** Strings longer than this become blobs. */
export const BLOB_THRESHOLD = 8 * 1024;
const REF = '\u0000blob';

export interface Encoded {
  bytes: Uint8Array;
  /** Blobs the payload refers to, by hash, with their text. */
  blobs: Map<string, string>;
}

export function encode(value: unknown, threshold = BLOB_THRESHOLD, codec: PartsCodec = 'brotli'): Encoded {
  const blobs = new Map<string, string>();
  const json = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'string' || v.length <= threshold) return v;
    const hash = sha256(v);
    blobs.set(hash, v);
    return { [REF]: hash };
  });
  return { bytes: compressWith(json ?? 'null', codec), blobs };
}

export function decode(bytes: Uint8Array, blobs: ReadonlyMap<string, string>, codec: PartsCodec = 'brotli'): unknown {
  return JSON.parse(decompressWith(bytes, codec), (_key, v: unknown) => fromRef(v, blobs));
}

function fromRef(v: unknown, blobs: ReadonlyMap<string, string>): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
  const hash = (v as Record<string, unknown>)[REF];
  if (typeof hash !== 'string') return v;
  const text = blobs.get(hash);
  if (text === undefined) throw new Error(`missing blob ${hash}`);
  return text;
}

/** Blob references in a parsed value (`rawParts`) replaced by their text (in place, bottom up). */
export function revive(v: unknown, blobs: ReadonlyMap<string, string>): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = revive(v[i], blobs);
    return v;
  }
  const record = v as Record<string, unknown>;
  if (typeof record[REF] === 'string') return fromRef(record, blobs);
  for (const key of Object.keys(record)) record[key] = revive(record[key], blobs);
  return record;
}

/**
 * How a payload is compressed: `brotli` (records and checkpoints written before the dictionary,
 * and what `encode` writes unless told), or `dict1`, deflate with RECORD_DICTIONARY_V1 (about
 * half the bytes of brotli on a turn record or checkpoint of a few KB, and cheaper to read).
 */
export type PartsCodec = 'brotli' | 'dict1';

/** Several payloads in one compression stream, each with its own blobs (read only when wanted). */
export interface EncodedParts {
  bytes: Uint8Array;
  blobs: Record<string, Map<string, string>>;
}

/**
 * Encodes named parts as one compression stream — smaller and cheaper than a stream each, as the
 * parts of a turn share most of their words — while each part's long strings still go to blobs
 * of its own, so a reader that wants one part fetches only that part's blobs.
 */
export function encodeParts(parts: Record<string, unknown>, thresholds: Record<string, number> = {}, codec: PartsCodec = 'dict1'): EncodedParts {
  const blobs: Record<string, Map<string, string>> = {};
  const spilled: Record<string, string> = {};
  for (const [name, value] of Object.entries(parts)) {
    const own = new Map<string, string>();
    const threshold = thresholds[name] ?? BLOB_THRESHOLD;
    spilled[name] = JSON.stringify(value, (_key, v: unknown) => {
      if (typeof v !== 'string' || v.length <= threshold) return v;
      const hash = sha256(v);
      own.set(hash, v);
      return { [REF]: hash };
    }) ?? 'null';
    blobs[name] = own;
  }
  const json = `{${Object.entries(spilled).map(([name, text]) => `${JSON.stringify(name)}:${text}`).join(',')}}`;
  return { bytes: compressWith(json, codec), blobs };
}

/** The parts `wanted` of an `encodeParts` payload; `blobs` need hold only theirs. */
export function decodeParts(bytes: Uint8Array, wanted: readonly string[], blobs: ReadonlyMap<string, string>, codec: PartsCodec): Record<string, unknown> {
  const all = rawParts(bytes, codec);
  const out: Record<string, unknown> = {};
  for (const name of wanted) {
    if (!(name in all)) continue;
    out[name] = revive(all[name], blobs);
  }
  return out;
}

/**
 * Every part of an `encodeParts` payload, parsed, its blob references left as they are: a
 * reader that wants a piece of a part finds the blobs that piece needs (`blobHashes`) and
 * fills them in (`revive`).
 */
export function rawParts(bytes: Uint8Array, codec: PartsCodec): Record<string, unknown> {
  return JSON.parse(decompressWith(bytes, codec)) as Record<string, unknown>;
}

/** The hashes of the blobs a parsed value refers to. */
export function blobHashes(v: unknown, into: Set<string> = new Set()): Set<string> {
  if (v === null || typeof v !== 'object') return into;
  if (Array.isArray(v)) {
    for (const item of v) blobHashes(item, into);
    return into;
  }
  const record = v as Record<string, unknown>;
  if (typeof record[REF] === 'string') into.add(record[REF]);
  else for (const value of Object.values(record)) blobHashes(value, into);
  return into;
}

export function compress(text: string): Uint8Array {
  return brotliCompressSync(Buffer.from(text, 'utf8'), {
    params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: text.length },
  });
}

export function decompress(bytes: Uint8Array): string {
  return brotliDecompressSync(bytes).toString('utf8');
}

const compressWith = (text: string, codec: PartsCodec) => (codec === 'dict1' ? deflateWithDictionary(text) : compress(text));
const decompressWith = (bytes: Uint8Array, codec: PartsCodec) => (codec === 'dict1' ? inflateWithDictionary(bytes) : decompress(bytes));

let dictionary: Buffer | undefined;
const recordDictionary = () => (dictionary ??= Buffer.from(RECORD_DICTIONARY_V1, 'utf8'));

/**
 * Measured on turn records of the example workflows (3-6 KB of JSON): ~44 µs a record at level 9
 * against brotli's ~76 µs at quality 5, for about half its bytes (470 B against 895 B); level 6
 * is within 1% of either figure. Reading one back takes ~16 µs.
 */
function deflateWithDictionary(text: string): Uint8Array {
  return deflateRawSync(Buffer.from(text, 'utf8'), { level: 9, memLevel: 9, dictionary: recordDictionary() });
}

function inflateWithDictionary(bytes: Uint8Array): string {
  return inflateRawSync(bytes, { dictionary: recordDictionary() }).toString('utf8');
}

export function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** JSON with object keys sorted, so equal requests hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, (v as Record<string, unknown>)[k]]));
  });
}
