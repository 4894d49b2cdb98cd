/**
 * The local backend's search index: full text (BM25, MiniSearch) over a knowledge base's chunks,
 * optionally with a dense vector per chunk. Pure: it builds, serializes, loads and searches, and
 * never does I/O; the store keeps the serialized text in blobs and a warm process caches the
 * loaded index.
 *
 * Scores follow RAGFlow's retriever, so thresholds and weights tuned there mean the same here:
 * - `term_similarity`, 0..1: the idf-weighted share of the question's terms the chunk contains
 *   (in its content, its important keywords or its document's name) — RAGFlow's token
 *   similarity. BM25 only picks and orders the `top_k` candidates;
 * - `vector_similarity`: the cosine of the question's vector and the chunk's, 0 without vectors;
 * - `similarity`: `(1 - w) * term + w * vector` with `w = 1 - keywords_similarity_weight` when
 *   both the question and the index have vectors, else `term_similarity`.
 * Chunks below `similarity_threshold` are dropped; the rest, best first, are paged by `top_n`.
 *
 * Memory: the loaded index holds every chunk's text, its postings and, with vectors, 4 bytes per
 * dimension per chunk (20k chunks × 1536 dimensions ≈ 120 MB) — the scale of a warm Lambda,
 * which is the local backend's limit.
 *
 * @example
 * const index = buildIndex(chunks);
 * const text = serializeIndex(index);               // into a blob
 * const result = searchIndex(deserializeIndex(text), { question: 'refund policy', top_n: 8,
 *   top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5 });
 */
import MiniSearch, { type Options, type SearchResult } from 'minisearch';
import { EaselError } from '../../errors';
import type { DocAgg, RetrievalQuery, RetrievalResult, RetrievedChunk } from '../types';
import { spans, terms } from './analyzer';

/** A chunk as the index takes it: the chunk item's fields, and its vector when the knowledge base embeds. */
export interface IndexedChunk {
  id: string;
  doc_id: string;
  doc_name: string;
  kb_id: string;
  content: string;
  important_kwd: string[];
  pages: number[];
  vector?: Float32Array | number[];
}

/** A built or loaded index; what it holds is this module's business. */
export interface LocalIndex {
  /** Chunks in the index. */
  readonly size: number;
}

/** What a LocalIndex is inside; only this module sees it. */
interface IndexState extends LocalIndex {
  readonly chunks: readonly StoredChunk[];
  readonly text: MiniSearch<IndexedDocument>;
  /** term -> how many chunks contain it (in any field). */
  readonly documentFrequency: ReadonlyMap<string, number>;
  readonly vectors?: VectorTable;
}

type StoredChunk = Omit<IndexedChunk, 'vector'>;

/** Unit-length vectors, one row per chunk; rows of chunks without a vector are all zero. */
interface VectorTable {
  dimensions: number;
  data: Float32Array;
  /** 1 where the chunk has a vector. */
  present: Uint8Array;
}

/** A chunk as MiniSearch sees it: its position in `chunks` and the searchable fields. */
interface IndexedDocument {
  id: number;
  content: string;
  important: string;
  title: string;
}

const FORMAT = 'easel-local-index';
const VERSION = 1;

/** Field boosts for the candidate ranking, after RAGFlow's (keywords over titles over text). */
const BOOST = { content: 1, important: 4, title: 2 } as const;

const SEARCHABLE = {
  fields: ['content', 'important', 'title'],
  tokenize: (text: string) => terms(text, { unigrams: true }),
  // the analyzer has normalised already
  processTerm: (term: string) => term,
} satisfies Partial<Options<IndexedDocument>>;

/** Indexes the chunks; throws EaselError('invalid_state') for an id given twice or vectors of different lengths. */
export function buildIndex(chunks: readonly IndexedChunk[]): LocalIndex {
  const stored: StoredChunk[] = [];
  const seen = new Set<string>();
  let dimensions: number | undefined;
  for (const chunk of chunks) {
    if (seen.has(chunk.id)) throw new EaselError('invalid_state', `chunk ${chunk.id} is in the index twice`);
    seen.add(chunk.id);
    if (chunk.vector && chunk.vector.length > 0) {
      dimensions ??= chunk.vector.length;
      if (chunk.vector.length !== dimensions) {
        throw new EaselError('invalid_state', `chunk ${chunk.id} has a vector of ${chunk.vector.length} dimensions, the others ${dimensions}`);
      }
    }
    // the fields named, copied: whatever else a caller's objects carry stays out of the blob
    const { id, doc_id, doc_name, kb_id, content, important_kwd, pages } = chunk;
    stored.push({ id, doc_id, doc_name, kb_id, content, important_kwd: [...important_kwd], pages: [...pages] });
  }

  // each field is analyzed once: MiniSearch's tokenizer also counts the chunk's distinct terms
  const documentFrequency = new Map<string, number>();
  const distinct = new Set<string>();
  const text = new MiniSearch<IndexedDocument>({
    ...SEARCHABLE,
    tokenize: (field) => {
      const found = SEARCHABLE.tokenize(field);
      for (const term of found) distinct.add(term);
      return found;
    },
  });
  stored.forEach((chunk, i) => {
    distinct.clear();
    text.add(toDocument(chunk, i));
    for (const term of distinct) documentFrequency.set(term, (documentFrequency.get(term) ?? 0) + 1);
  });

  let vectors: VectorTable | undefined;
  if (dimensions !== undefined) {
    const data = new Float32Array(stored.length * dimensions);
    chunks.forEach((chunk, i) => {
      if (chunk.vector && chunk.vector.length > 0) writeUnit(data, i * dimensions!, chunk.vector);
    });
    vectors = table(dimensions, data);
  }
  return state(stored, text, documentFrequency, vectors);
}

/** The index as JSON text (versioned), vectors as base64 float32: what the blob holds. */
export function serializeIndex(index: LocalIndex): string {
  const s = internals(index);
  return JSON.stringify({
    format: FORMAT,
    version: VERSION,
    chunks: s.chunks,
    text: s.text.toJSON(),
    documentFrequency: Object.fromEntries(s.documentFrequency),
    ...(s.vectors
      ? {
          vectors: {
            dimensions: s.vectors.dimensions,
            data: Buffer.from(s.vectors.data.buffer, s.vectors.data.byteOffset, s.vectors.data.byteLength).toString('base64'),
          },
        }
      : {}),
  });
}

/** Loads what serializeIndex wrote; throws EaselError('invalid_state') for anything else. */
export function deserializeIndex(text: string): LocalIndex {
  let parsed: SerializedIndex;
  try {
    parsed = JSON.parse(text) as SerializedIndex;
  } catch (error) {
    throw new EaselError('invalid_state', 'the serialized index is not JSON', { cause: error });
  }
  if (
    parsed?.format !== FORMAT ||
    parsed.version !== VERSION ||
    !Array.isArray(parsed.chunks) ||
    typeof parsed.text !== 'object' ||
    typeof parsed.documentFrequency !== 'object'
  ) {
    throw new EaselError('invalid_state', `the serialized index is not a ${FORMAT} of version ${VERSION}`);
  }
  let miniSearch: MiniSearch<IndexedDocument>;
  try {
    miniSearch = MiniSearch.loadJS<IndexedDocument>(parsed.text, SEARCHABLE);
  } catch (error) {
    throw new EaselError('invalid_state', 'the serialized index has a full-text part that does not load', { cause: error });
  }
  if (miniSearch.documentCount !== parsed.chunks.length) {
    throw new EaselError('invalid_state', 'the serialized index has a full-text part for a different number of chunks');
  }
  let vectors: VectorTable | undefined;
  if (parsed.vectors) {
    const bytes = Buffer.from(parsed.vectors.data, 'base64');
    // copy into an aligned buffer of its own: a Buffer may sit at any offset of a shared pool
    const data = new Float32Array(bytes.byteLength / 4);
    new Uint8Array(data.buffer).set(bytes);
    if (data.length !== parsed.chunks.length * parsed.vectors.dimensions) {
      throw new EaselError('invalid_state', 'the serialized index has vectors for a different number of chunks');
    }
    vectors = table(parsed.vectors.dimensions, data);
  }
  return state(parsed.chunks, miniSearch, new Map(Object.entries(parsed.documentFrequency)), vectors);
}

interface SerializedIndex {
  format: string;
  version: number;
  chunks: StoredChunk[];
  text: Parameters<typeof MiniSearch.loadJS>[0];
  documentFrequency: Record<string, number>;
  vectors?: { dimensions: number; data: string };
}

/** Best first; similarity semantics above; applies top_k, threshold, doc_ids, top_n/page; doc_aggs over all passing. */
export function searchIndex(index: LocalIndex, query: RetrievalQuery, queryVector?: readonly number[]): RetrievalResult {
  const s = internals(index);
  // as RAGFlow: no question, no retrieval (a question of stop words alone may still match by vector)
  if (query.question.trim() === '') return { chunks: [], doc_aggs: [], total: 0 };
  const questionTerms = [...new Set(terms(query.question))];
  const allowed = query.doc_ids && query.doc_ids.length > 0 ? new Set(query.doc_ids) : undefined;
  const passes = (i: number) => !allowed || allowed.has(s.chunks[i]!.doc_id);
  const topK = Math.max(0, Math.floor(query.top_k));

  const matches = new Map<number, SearchResult>();
  const candidates: number[] = [];
  if (questionTerms.length > 0) {
    const results = s.text.search(questionTerms.join(' '), {
      tokenize: (q) => q.split(' '),
      processTerm: (t) => t,
      combineWith: 'OR',
      prefix: false,
      fuzzy: false,
      boost: BOOST,
      filter: (r) => passes(r.id as number),
    });
    for (const result of results) matches.set(result.id as number, result);
    for (const result of results.slice(0, topK)) candidates.push(result.id as number);
  }

  const vectorWeight = 1 - clamp01(query.keywords_similarity_weight);
  const questionVector = s.vectors && queryVector && queryVector.length > 0 ? unit(queryVector, s.vectors.dimensions) : undefined;
  const cosine = new Float32Array(questionVector ? s.chunks.length : 0);
  if (questionVector && s.vectors) {
    const eligible: number[] = [];
    for (let i = 0; i < s.chunks.length; i++) {
      if (!s.vectors.present[i] || !passes(i)) continue;
      cosine[i] = dot(questionVector, s.vectors.data, i * s.vectors.dimensions);
      eligible.push(i);
    }
    const inText = new Set(candidates);
    for (const i of best(eligible, topK, (i) => cosine[i]!)) if (!inText.has(i)) candidates.push(i);
  }

  const weights = questionTerms.map((t) => idf(s.documentFrequency.get(t) ?? 0, s.chunks.length));
  const totalWeight = weights.reduce((a, b) => a + b, 0);
  const scored = candidates.map((i) => {
    const match = matches.get(i);
    let term = 0;
    if (match && totalWeight > 0) {
      const found = new Set(match.queryTerms);
      let share = 0;
      questionTerms.forEach((t, k) => {
        if (found.has(t)) share += weights[k]!;
      });
      term = share / totalWeight;
    }
    // as RAGFlow: a chunk without a vector of its own scores as a zero vector would (cosine 0)
    const vector = questionVector ? cosine[i]! : 0;
    const similarity = questionVector ? (1 - vectorWeight) * term + vectorWeight * vector : term;
    return { i, term, vector, similarity, bm25: match?.score ?? 0 };
  });
  scored.sort((a, b) => b.similarity - a.similarity || b.bm25 - a.bm25 || a.i - b.i);
  const passing = scored.slice(0, topK).filter((c) => c.similarity > 0 && c.similarity >= query.similarity_threshold);

  const page = Math.max(1, Math.floor(query.page ?? 1));
  const perPage = Math.max(0, Math.floor(query.top_n));
  const highlightTerms = query.highlight ? new Set(questionTerms) : undefined;
  const chunks = passing.slice((page - 1) * perPage, page * perPage).map((c): RetrievedChunk => {
    const chunk = s.chunks[c.i]!;
    return {
      chunk_id: chunk.id,
      content_with_weight: chunk.content,
      doc_id: chunk.doc_id,
      docnm_kwd: chunk.doc_name,
      kb_id: chunk.kb_id,
      important_kwd: [...chunk.important_kwd],
      image_id: '',
      similarity: c.similarity,
      vector_similarity: c.vector,
      term_similarity: c.term,
      positions: chunk.pages.map((p) => [p, 0, 0, 0, 0]),
      doc_type_kwd: '',
      ...(highlightTerms ? { highlight: highlight(chunk.content, highlightTerms) } : {}),
    };
  });
  return { chunks, doc_aggs: docAggs(passing.map((c) => s.chunks[c.i]!)), total: passing.length };
}

/** The content with every span whose term is asked for wrapped in `<em>`; overlapping spans merge. */
export function highlight(content: string, wanted: ReadonlySet<string>): string {
  const ranges: [number, number][] = [];
  for (const span of spans(content, { unigrams: true })) {
    if (!wanted.has(span.term)) continue;
    const last = ranges[ranges.length - 1];
    if (last && span.start <= last[1]) last[1] = Math.max(last[1], span.end);
    else ranges.push([span.start, span.end]);
  }
  let out = '';
  let at = 0;
  for (const [start, end] of ranges) {
    out += `${content.slice(at, start)}<em>${content.slice(start, end)}</em>`;
    at = end;
  }
  return out + content.slice(at);
}

function docAggs(chunks: readonly StoredChunk[]): DocAgg[] {
  const byDoc = new Map<string, DocAgg>();
  for (const chunk of chunks) {
    const agg = byDoc.get(chunk.doc_id);
    if (agg) agg.count++;
    else byDoc.set(chunk.doc_id, { doc_name: chunk.doc_name, doc_id: chunk.doc_id, count: 1 });
  }
  // stable: equal counts keep the order of their best chunk
  return [...byDoc.values()].sort((a, b) => b.count - a.count);
}

function toDocument(chunk: StoredChunk, i: number): IndexedDocument {
  return { id: i, content: chunk.content, important: chunk.important_kwd.join('\n'), title: chunk.doc_name };
}

function state(chunks: readonly StoredChunk[], text: MiniSearch<IndexedDocument>, documentFrequency: ReadonlyMap<string, number>, vectors?: VectorTable): IndexState {
  return { size: chunks.length, chunks, text, documentFrequency, ...(vectors ? { vectors } : {}) };
}

function internals(index: LocalIndex): IndexState {
  const s = index as IndexState;
  if (!s.text || !Array.isArray(s.chunks)) throw new EaselError('invalid_state', 'not an index made by buildIndex or deserializeIndex');
  return s;
}

/** BM25's idf; a term no chunk has weighs as one in a single chunk, so a typo costs a share but not everything. */
function idf(df: number, n: number): number {
  const d = Math.max(1, df);
  return Math.log(1 + (Math.max(n, d) - d + 0.5) / (d + 0.5));
}

/** The `k` items of highest score, best first (a bounded min-heap: one pass, no full sort). */
function best(items: readonly number[], k: number, score: (item: number) => number): number[] {
  if (k <= 0) return [];
  const heap: number[] = [];
  const less = (a: number, b: number) => score(a) < score(b) || (score(a) === score(b) && a > b);
  const down = (at: number) => {
    for (;;) {
      const l = 2 * at + 1;
      const r = l + 1;
      let min = at;
      if (l < heap.length && less(heap[l]!, heap[min]!)) min = l;
      if (r < heap.length && less(heap[r]!, heap[min]!)) min = r;
      if (min === at) return;
      [heap[at], heap[min]] = [heap[min]!, heap[at]!];
      at = min;
    }
  };
  for (const item of items) {
    if (heap.length < k) {
      heap.push(item);
      for (let at = heap.length - 1; at > 0; ) {
        const parent = (at - 1) >> 1;
        if (!less(heap[at]!, heap[parent]!)) break;
        [heap[at], heap[parent]] = [heap[parent]!, heap[at]!];
        at = parent;
      }
    } else if (less(heap[0]!, item)) {
      heap[0] = item;
      down(0);
    }
  }
  return heap.sort((a, b) => (less(a, b) ? 1 : less(b, a) ? -1 : 0));
}

function clamp01(x: number): number {
  return Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0;
}

function writeUnit(out: Float32Array, offset: number, vector: ArrayLike<number>): void {
  let norm = 0;
  for (let k = 0; k < vector.length; k++) norm += vector[k]! * vector[k]!;
  norm = Math.sqrt(norm);
  if (norm === 0 || !Number.isFinite(norm)) return;
  for (let k = 0; k < vector.length; k++) out[offset + k] = vector[k]! / norm;
}

function unit(vector: readonly number[], dimensions: number): Float32Array | undefined {
  if (vector.length !== dimensions) {
    throw new EaselError('invalid_state', `the question's vector has ${vector.length} dimensions, the index's ${dimensions}`);
  }
  const out = new Float32Array(dimensions);
  writeUnit(out, 0, vector);
  return out.some((x) => x !== 0) ? out : undefined;
}

function dot(a: Float32Array, table: Float32Array, offset: number): number {
  let sum = 0;
  for (let k = 0; k < a.length; k++) sum += a[k]! * table[offset + k]!;
  return sum;
}

function table(dimensions: number, data: Float32Array): VectorTable {
  const rows = dimensions > 0 ? data.length / dimensions : 0;
  const present = new Uint8Array(rows);
  for (let i = 0; i < rows; i++) {
    const offset = i * dimensions;
    for (let k = 0; k < dimensions; k++) {
      if (data[offset + k] !== 0) {
        present[i] = 1;
        break;
      }
    }
  }
  return { dimensions, data, present };
}
