/**
 * Stored payloads: JSON, with every long string moved out into a content-addressed blob (so a
 * large value is written once, however many turns carry it), then brotli-compressed. A blob
 * reference is an object with a single NUL-prefixed key, which no JSON the engine produces has.
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';

/** Strings longer than this become blobs. */
export const BLOB_THRESHOLD = 8 * 1024;
const REF = '\u0000blob';

export interface Encoded {
  bytes: Uint8Array;
  /** Blobs the payload refers to, by hash, with their text. */
  blobs: Map<string, string>;
}

export function encode(value: unknown, threshold = BLOB_THRESHOLD): Encoded {
  const blobs = new Map<string, string>();
  const json = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'string' || v.length <= threshold) return v;
    const hash = sha256(v);
    blobs.set(hash, v);
    return { [REF]: hash };
  });
  return { bytes: compress(json ?? 'null'), blobs };
}

export function decode(bytes: Uint8Array, blobs: ReadonlyMap<string, string>): unknown {
  return JSON.parse(decompress(bytes), (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const hash = (v as Record<string, unknown>)[REF];
    if (typeof hash !== 'string') return v;
    const text = blobs.get(hash);
    if (text === undefined) throw new Error(`missing blob ${hash}`);
    return text;
  });
}

export function compress(text: string): Uint8Array {
  return brotliCompressSync(Buffer.from(text, 'utf8'), {
    params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: text.length },
  });
}

export function decompress(bytes: Uint8Array): string {
  return brotliDecompressSync(bytes).toString('utf8');
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
