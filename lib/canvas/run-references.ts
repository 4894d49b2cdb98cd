/**
 * The references of a pass: the chunks its retrievals found and their documents, as RAGFlow's
 * canvas keeps them in the last entry of its `retrieval` list. Chunks are keyed by their
 * citation id — `int(sha1(chunk id)) % 500`, the number a model writes as `[ID:n]` — as a
 * string (the key of a JSON object); documents by name. A later chunk with the same key takes
 * the place of the earlier one, as in RAGFlow.
 *
 * The engine knows a chunk only as JSON with an `id`; what else it holds is the caller's
 * (lib/knowledge/format.ts `chunkReference`). A pass keeps at most `MAX_REFERENCE_CHUNKS`
 * chunks and `MAX_REFERENCE_DOCS` documents: later ones are not added, so the state stays
 * bounded however many retrievals a loop makes. Chunk content is kept as it is.
 */
import { createHash } from 'node:crypto';

export interface RunReference {
  /** Reference chunks by citation id. */
  chunks: Record<string, Record<string, unknown>>;
  /** Documents by name (RAGFlow's `doc_aggs`: name, id, count). */
  doc_aggs: Record<string, Record<string, unknown>>;
}

/** A chunk as the engine keeps it: JSON with the chunk's id. */
export interface ReferenceChunk {
  readonly id: string;
  readonly [field: string]: unknown;
}

/** A document as the engine keeps it: JSON with the document's name. */
export interface ReferenceDocument {
  readonly doc_name: string;
  readonly [field: string]: unknown;
}

/** Chunks one pass keeps. */
export const MAX_REFERENCE_CHUNKS = 64;
/** Documents one pass keeps. */
export const MAX_REFERENCE_DOCS = 64;
/** RAGFlow's modulus for citation ids (`hash_str2int(id, 500)`). */
export const CITATION_MODULUS = 500;

/** The citation id of a chunk: `int(sha1(id).hexdigest(), 16) % 500`, as text. */
export function citationKey(chunkId: string): string {
  const hex = createHash('sha1').update(chunkId, 'utf8').digest('hex');
  let rest = 0;
  for (const digit of hex) rest = (rest * 16 + Number.parseInt(digit, 16)) % CITATION_MODULUS;
  return String(rest);
}

export function emptyReference(): RunReference {
  // null-prototype records: any key a chunk or document has is an ordinary key
  return { chunks: Object.create(null) as RunReference['chunks'], doc_aggs: Object.create(null) as RunReference['doc_aggs'] };
}

export function hasReference(reference: RunReference | undefined): reference is RunReference {
  return reference !== undefined && (Object.keys(reference.chunks).length > 0 || Object.keys(reference.doc_aggs).length > 0);
}

/** `current` with the chunks and documents added (a new object; `current` is untouched). */
export function withAdded(current: RunReference | undefined, chunks: readonly ReferenceChunk[], docs: readonly ReferenceDocument[]): RunReference {
  const next = copyOf(current);
  for (const chunk of chunks) {
    if (typeof chunk?.id !== 'string') continue;
    const key = citationKey(chunk.id);
    if (Object.hasOwn(next.chunks, key) || Object.keys(next.chunks).length < MAX_REFERENCE_CHUNKS) next.chunks[key] = { ...chunk };
  }
  for (const doc of docs) {
    if (typeof doc?.doc_name !== 'string') continue;
    if (Object.hasOwn(next.doc_aggs, doc.doc_name) || Object.keys(next.doc_aggs).length < MAX_REFERENCE_DOCS) next.doc_aggs[doc.doc_name] = { ...doc };
  }
  return next;
}

/** `current` narrowed to these chunks and documents. */
export function narrowed(current: RunReference, citationIds: readonly string[], docNames: readonly string[]): RunReference {
  const next = emptyReference();
  for (const key of citationIds) {
    const chunk = current.chunks[key];
    if (chunk) next.chunks[key] = chunk;
  }
  for (const name of docNames) {
    const doc = current.doc_aggs[name];
    if (doc) next.doc_aggs[name] = doc;
  }
  return next;
}

/** A reference read from a stored state, or undefined when it is not one. */
export function readReference(raw: unknown): RunReference | undefined {
  if (!isObject(raw) || !isObject(raw.chunks) || !isObject(raw.doc_aggs)) return undefined;
  const out = emptyReference();
  for (const [key, chunk] of Object.entries(raw.chunks)) if (isObject(chunk)) out.chunks[key] = chunk;
  for (const [key, doc] of Object.entries(raw.doc_aggs)) if (isObject(doc)) out.doc_aggs[key] = doc;
  return out;
}

function copyOf(reference: RunReference | undefined): RunReference {
  const out = emptyReference();
  if (reference) {
    Object.assign(out.chunks, reference.chunks);
    Object.assign(out.doc_aggs, reference.doc_aggs);
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
