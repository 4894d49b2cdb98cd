/**
 * A retrieval as its call record keeps it, and answered again from that record. The record
 * keeps what the chunks cannot give back — their ids and scores, the total, the per-document
 * counts (`doc_aggs`) — but not the chunks themselves: their text is already in the turn's
 * state (the Retrieval's `json` output), in the same compressed stream, and a copy in the
 * record would cost a blob write for every chunk over 1 KB. So a record answers a call only
 * together with the chunks (`RetrievalReplay`): an async turn's checkpoint carries them for the
 * batch it runs again, a replay against another version takes them from the recorded turn's
 * state — and they answer only when their ids and scores are exactly those the record lists.
 *
 * `doc_aggs` are kept compactly: a document one of the chunks is from as `[chunk index, count]`,
 * any other in full; when those others' JSON exceeds MAX_RECORDED_OTHER_DOCS_BYTES the record
 * keeps none, and a replay makes the retrieval again (as it does for records written before
 * `doc_aggs` were kept).
 */
import type { CompletedCall } from '../canvas/calls';
import { isRecord } from '../canvas/references';
import type { DocAgg, RetrievalResult, RetrievedChunk } from '../knowledge/types';

/** @default bytes of JSON a record spends on documents that none of the chunks is from */
export const MAX_RECORDED_OTHER_DOCS_BYTES = 512;

/** What answering a recorded retrieval needs beyond its record (`CompletedCall.replay`). */
export interface RetrievalReplay {
  /** The chunks the retrieval returned, as its `json` output holds them. */
  chunks: readonly unknown[];
  /** Its `doc_aggs` in full (a checkpoint has them; a replay reads them from the record). */
  doc_aggs?: readonly unknown[];
}

/** A document as the record keeps it: the index of a chunk from it and its count, or the whole entry. */
type RecordedDoc = [chunk: number, count: number] | Record<string, unknown>;

interface RecordedResult {
  total: number;
  chunks: { chunk_id: string; similarity: number }[];
  doc_aggs?: RecordedDoc[];
}

/** The record's result for a retrieval that returned `result`. */
export function retrievalRecordResult(result: RetrievalResult): RecordedResult {
  const out: RecordedResult = { total: result.total, chunks: result.chunks.map((c) => ({ chunk_id: c.chunk_id, similarity: c.similarity })) };
  const docs = recordedDocs(result.doc_aggs, result.chunks);
  if (docs) out.doc_aggs = docs;
  return out;
}

/** What a checkpoint keeps of the call beside its record: the chunks and documents in full. */
export function retrievalReplay(result: RetrievalResult): RetrievalReplay {
  return { chunks: result.chunks, doc_aggs: result.doc_aggs };
}

/**
 * The result a recorded retrieval returned, when its record and the chunks that came with it
 * give it back exactly; undefined (make the call) for a failure, a record without `doc_aggs`,
 * or chunks whose ids or scores are not the record's (say a Loop ran the Retrieval again and
 * its output is the later round's).
 */
export function recordedRetrieval(call: CompletedCall | undefined): RetrievalResult | undefined {
  if (!call || call.record.status !== 'ok') return undefined;
  const recorded = call.record.result;
  const extra = call.replay;
  if (!isRecord(recorded) || typeof recorded.total !== 'number' || !Array.isArray(recorded.chunks)) return undefined;
  if (!isRecord(extra) || !Array.isArray(extra.chunks)) return undefined;
  const listed = recorded.chunks as unknown[];
  const chunks = extra.chunks as unknown[];
  if (chunks.length !== listed.length) return undefined;
  for (const [i, chunk] of chunks.entries()) {
    const entry = listed[i];
    if (!isRecord(chunk) || !isRecord(entry) || typeof chunk.chunk_id !== 'string' || chunk.chunk_id !== entry.chunk_id || chunk.similarity !== entry.similarity) return undefined;
  }
  const docAggs = Array.isArray(extra.doc_aggs) ? (extra.doc_aggs as DocAgg[]) : docsFromRecord(recorded.doc_aggs, chunks as RetrievedChunk[]);
  if (!docAggs) return undefined;
  return { chunks: chunks as RetrievedChunk[], doc_aggs: docAggs, total: recorded.total };
}

function recordedDocs(docAggs: readonly DocAgg[], chunks: readonly RetrievedChunk[]): RecordedDoc[] | undefined {
  let others = 0;
  const out: RecordedDoc[] = [];
  for (const agg of docAggs) {
    const keys = Object.keys(agg);
    const plain = keys.length === 3 && typeof agg.count === 'number' && 'doc_name' in agg && 'doc_id' in agg;
    const at = plain ? chunks.findIndex((c) => c.doc_id === agg.doc_id && c.docnm_kwd === agg.doc_name) : -1;
    if (at >= 0) {
      out.push([at, agg.count]);
      continue;
    }
    others += JSON.stringify(agg).length + 1;
    if (others > MAX_RECORDED_OTHER_DOCS_BYTES) return undefined;
    out.push({ ...agg });
  }
  return out;
}

function docsFromRecord(value: unknown, chunks: readonly RetrievedChunk[]): DocAgg[] | undefined {
  if (!Array.isArray(value)) return undefined;
  const out: DocAgg[] = [];
  for (const doc of value as unknown[]) {
    if (Array.isArray(doc)) {
      const [at, count] = doc as unknown[];
      const chunk = typeof at === 'number' ? chunks[at] : undefined;
      if (!chunk || typeof count !== 'number') return undefined;
      out.push({ doc_name: chunk.docnm_kwd, doc_id: chunk.doc_id, count });
    } else if (isRecord(doc)) {
      out.push({ ...doc } as unknown as DocAgg);
    } else {
      return undefined;
    }
  }
  return out;
}
