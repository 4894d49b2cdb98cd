/**
 * What a search tool hands back, the same for every service it searches: RAGFlow's
 * `_retrieve_chunks` (agent/tools/base.py) — one chunk and one document per result with text,
 * inline base64 images dropped, the text cut at 10,000 characters — read by the model as
 * knowledge blocks (`kb_prompt`) and added to the pass's references.
 *
 * A result's id comes from its URL rather than its text (RAGFlow hashes the text), so the same
 * page found by two searches keeps one id and a citation of it stays valid.
 *
 * @example
 *   return searchResult(pages.map((p) => ({ title: p.title, url: p.url, content: p.summary })), 'Wikipedia found no articles for this query.');
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { chunkReference, formatChunks } from '../knowledge/format';
import { withDefault } from './params';
import type { ToolResult } from './types';

/** One result as a search tool found it. */
export interface FoundItem {
  title: string;
  url: string;
  content: string;
  /** @default 1, as RAGFlow scores results a service does not rank by number */
  score?: number;
}

/** RAGFlow's cap on one result's text (`content[:10000]`). */
export const MAX_FOUND_CHARS = 10_000;

const INLINE_IMAGE = /!?\[[a-z]+\]\(data:image\/png;base64,[ 0-9A-Za-z/_=+-]+\)/g;

/** The knowledge blocks and references of `items`; `nothingFound` when none has text. */
export function searchResult(items: readonly FoundItem[], nothingFound: string): ToolResult {
  const chunks: Record<string, unknown>[] = [];
  const docs: { doc_name: string; doc_id: string; count: number; url: string }[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    const content = item.content.replace(INLINE_IMAGE, '').slice(0, MAX_FOUND_CHARS);
    if (!content.trim() || seen.has(item.url)) continue;
    seen.add(item.url);
    const id = hashStr2Int(item.url);
    const title = item.title || item.url;
    chunks.push({ chunk_id: id, content, doc_id: id, docnm_kwd: title, similarity: item.score ?? 1, url: item.url });
    docs.push({ doc_name: title, doc_id: id, count: 1, url: item.url });
  }
  if (chunks.length === 0) return { kind: 'result', content: nothingFound };
  return { kind: 'result', content: formatChunks(chunks), references: { chunks: chunks.map(chunkReference), doc_aggs: docs } };
}

/** A search's `top_n`: RAGFlow's `check_positive_integer`, its default when the DSL leaves it out. */
export function topNParam(description: string, fallback: number) {
  const message = `${description} should be a positive integer`;
  return withDefault(z.number(message).int(message).min(1, message), fallback);
}

/** RAGFlow's `hash_str2int(line)`: `int(sha1(line).hexdigest(), 16) % 10**8`, as text. */
export function hashStr2Int(line: string): string {
  const hex = createHash('sha1').update(line, 'utf8').digest('hex');
  return String(BigInt(`0x${hex}`) % 100_000_000n);
}
