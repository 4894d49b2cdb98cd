/**
 * What every web search tool hands back, the same way (RAGFlow's `ToolBase._retrieve_chunks`):
 * one knowledge block per result with text, which the model reads and cites, and the same
 * results as the pass's references. A result's id comes from its URL, so the same page found
 * by two searches keeps one id and a citation of it stays valid.
 *
 * @example
 *   return webSearchResult(answer.results.map((r) => ({ title: r.title, url: r.url, content: r.content })), {
 *     nothingFound: 'SearXNG found no web results for this query.',
 *     data: answer.results,
 *   });
 */
import { createHash } from 'node:crypto';
import { chunkReference, formatChunks } from '../knowledge/format';
import type { ToolResult } from './types';

/** One search result as the tool read it from its service. */
export interface WebResult {
  readonly title?: string | null;
  readonly url?: string | null;
  /** The text the model reads; a result without text is left out, as RAGFlow leaves it out. */
  readonly content?: string | null;
  /** The service's relevance, when it gives one. @default 1 */
  readonly score?: number | null;
}

/** RAGFlow's cap on one result's text (`content[:10000]`). */
export const MAX_WEB_RESULT_CHARS = 10_000;

/** Inline base64 images, which RAGFlow strips before the model reads a result. */
const INLINE_IMAGE = /!?\[[a-z]+\]\(data:image\/png;base64,[ 0-9A-Za-z/_=+-]+\)/g;

/** RAGFlow's chunks and document aggregates for `results`, one each per result with text, the first of each URL. */
export function webChunks(results: readonly WebResult[]) {
  const chunks: Record<string, unknown>[] = [];
  const docs: { doc_name: string; doc_id: string; count: number; url: string }[] = [];
  const seen = new Set<string>();
  for (const r of results) {
    const content = (r.content ?? '').replace(INLINE_IMAGE, '').slice(0, MAX_WEB_RESULT_CHARS);
    const url = r.url ?? '';
    const key = url || content;
    if (!content.trim() || seen.has(key)) continue;
    seen.add(key);
    const id = hashStr2Int(key);
    const title = r.title || url;
    chunks.push({ chunk_id: id, content, doc_id: id, docnm_kwd: title, similarity: r.score ?? 1, url });
    docs.push({ doc_name: title, doc_id: id, count: 1, url });
  }
  return { chunks, docs };
}

/**
 * The tool's result: the knowledge blocks as `content`, the results as references, and `data`
 * (RAGFlow's `json` output) as given; `nothingFound` when no result has text.
 */
export function webSearchResult(results: readonly WebResult[], options: { nothingFound: string; data?: unknown }): ToolResult {
  const { chunks, docs } = webChunks(results);
  const data = options.data !== undefined ? { data: options.data } : {};
  if (chunks.length === 0) return { kind: 'result', content: options.nothingFound, ...data };
  return { kind: 'result', content: formatChunks(chunks), ...data, references: { chunks: chunks.map(chunkReference), doc_aggs: docs } };
}

/** RAGFlow's `hash_str2int(line)`: `int(sha1(line).hexdigest(), 16) % 10**8`, as text. */
export function hashStr2Int(line: string): string {
  const hex = createHash('sha1').update(line, 'utf8').digest('hex');
  return String(BigInt(`0x${hex}`) % 100_000_000n);
}
