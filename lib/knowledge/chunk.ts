/**
 * RAGFlow's "naive" chunker (`naive_merge` in rag/nlp/__init__.py, its delimiter field in
 * rag/nlp/delim.py), with one change: the token budget is a ceiling, not a target.
 *
 * - The document's sections are split at the delimiters into pieces; the delimiters' text is
 *   dropped, and so are pieces that are empty or only whitespace, and blank lines and trailing
 *   whitespace around a piece. Each character of the
 *   field is a delimiter, a run in backticks one delimiter (`` `##` ``), longest first.
 * - Pieces are merged in order, joined by `\n`, while the chunk stays within its budget.
 *   RAGFlow lets the piece that crosses the budget in and keeps an oversized piece whole;
 *   here a chunk never has more than `chunk_token_num` tokens, and a piece larger than the
 *   budget is cut, preferably at a line, sentence or word end.
 * - With `overlapped_percent` p, the last p% of a chunk's characters (from its word's start) begin
 *   the next one; the budget keeps p% of its tokens for that, as RAGFlow's threshold does.
 * - A delimiter field with a backtick run is RAGFlow's custom mode: every piece is a chunk of
 *   its own (cut only when over budget), without overlap.
 *
 * Deterministic: the same document and settings give the same chunks. Needs the tokenizer
 * (`parseDocument` loads it; otherwise `await loadTokenizer()` first).
 *
 * @example
 *   naiveChunk({ sections: [{ text: 'a\nb', page: 1 }] }, DEFAULT_CHUNKING);
 *   // [{ content: 'a\nb', token_count: 3, pages: [1] }]
 */
import { countTokens } from './tokens';
import type { ChunkingSettings, ParsedDocument, TextChunk } from './types';
import { DEFAULT_CHUNKING } from './types';

/** The most that `overlapped_percent` can ask, as RAGFlow clamps it. */
export const MAX_OVERLAP_PERCENT = 90;

interface Piece {
  text: string;
  tokens: number;
  page?: number;
}

/** Where a page's text lies in a chunk's content, so an overlap knows its pages too. */
interface Span {
  start: number;
  end: number;
  page?: number;
}

interface Chunk {
  content: string;
  tokens: number;
  spans: Span[];
}

export function naiveChunk(doc: ParsedDocument, settings: ChunkingSettings): TextChunk[] {
  const budget = tokenBudget(settings.chunk_token_num);
  const delimiter = settings.delimiter ?? DEFAULT_CHUNKING.delimiter;
  const pattern = delimiterPattern(parseDelimiterField(delimiter));
  const custom = hasWrappedDelimiter(delimiter);
  const overlap = custom ? 0 : normalizeOverlapPercent(settings.overlapped_percent);
  // Room kept for the overlap, so that overlap + body stays within the budget.
  const reserve = Math.floor((budget * overlap) / 100);
  const bodyBudget = Math.max(1, budget - reserve);

  const pieces = splitPieces(doc, pattern, bodyBudget);
  const bodies = custom ? pieces.map((piece) => bodyOf([piece])) : mergePieces(pieces, bodyBudget);
  const chunks = overlap > 0 ? withOverlap(bodies, overlap, budget) : bodies;
  return chunks.map(toTextChunk);
}

/** RAGFlow's `normalize_overlapped_percent`: a fraction below 1 is a ratio, then 0–90 whole. */
export function normalizeOverlapPercent(value: number): number {
  if (!Number.isFinite(value) || value <= 0) return 0;
  const percent = value < 1 ? value * 100 : value;
  return Math.min(Math.trunc(percent), MAX_OVERLAP_PERCENT);
}

function tokenBudget(value: number): number {
  return Number.isFinite(value) && value >= 1 ? Math.floor(value) : DEFAULT_CHUNKING.chunk_token_num;
}

/**
 * RAGFlow's `parse_delimiter_field`: `\r\n` and `\r` as `\n`; each character outside
 * backticks is a delimiter, each backtick run one; deduplicated, longest first.
 *
 * @example
 *   parseDelimiterField('\n`##`;'); // ['##', '\n', ';']
 */
export function parseDelimiterField(field: string): string[] {
  const normalized = normalizeNewlines(field);
  const delimiters: string[] = [];
  const add = (delimiter: string): void => {
    if (delimiter !== '' && !delimiters.includes(delimiter)) delimiters.push(delimiter);
  };
  let cursor = 0;
  for (const match of normalized.matchAll(/`([^`]+)`/g)) {
    for (const char of normalized.slice(cursor, match.index)) add(char);
    add(match[1]!);
    cursor = match.index + match[0].length;
  }
  for (const char of normalized.slice(cursor)) add(char);
  // Array.prototype.sort is stable: equal lengths keep their order of first appearance.
  return delimiters.sort((a, b) => b.length - a.length);
}

/** Whether the field has a backtick run: RAGFlow's custom mode, one chunk per piece. */
export function hasWrappedDelimiter(field: string): boolean {
  return /`[^`]+`/.test(field);
}

function delimiterPattern(delimiters: readonly string[]): RegExp | undefined {
  if (delimiters.length === 0) return undefined;
  return new RegExp(delimiters.map((delimiter) => delimiter.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|'), 'u');
}

function normalizeNewlines(text: string): string {
  return text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text;
}

/** The pieces of every section in order, none over `limit` tokens. */
function splitPieces(doc: ParsedDocument, pattern: RegExp | undefined, limit: number): Piece[] {
  const pieces: Piece[] = [];
  for (const section of doc.sections) {
    const text = normalizeNewlines(section.text);
    const parts = pattern ? text.split(pattern) : [text];
    for (const part of parts) {
      // Blank lines around a piece are not its text; a first line's indentation is (code).
      const trimmed = part.replace(/^(?:[^\S\n]*\n)+/, '').trimEnd();
      if (trimmed === '') continue;
      for (const piece of splitToBudget(trimmed, limit)) {
        pieces.push(section.page === undefined ? piece : { ...piece, page: section.page });
      }
    }
  }
  return pieces;
}

/** Greedy merge: a chunk takes the next piece while it stays within `limit` tokens. */
function mergePieces(pieces: readonly Piece[], limit: number): Chunk[] {
  const chunks: Chunk[] = [];
  let group: Piece[] = [];
  let estimate = 0;
  const close = (): void => {
    // The estimate counts each `\n` as a token; the joined text is counted to be sure.
    while (group.length > 0) {
      let take = group.length;
      let chunk = bodyOf(group);
      while (take > 1 && chunk.tokens > limit) chunk = bodyOf(group.slice(0, --take));
      chunks.push(chunk);
      group = group.slice(take);
    }
    estimate = 0;
  };
  for (const piece of pieces) {
    const next = group.length === 0 ? piece.tokens : estimate + 1 + piece.tokens;
    if (group.length > 0 && next > limit) close();
    estimate = group.length === 0 ? piece.tokens : estimate + 1 + piece.tokens;
    group.push(piece);
  }
  close();
  return chunks;
}

function joinPieces(pieces: readonly Piece[]): string {
  return pieces.map((piece) => piece.text).join('\n');
}

function bodyOf(pieces: readonly Piece[]): Chunk {
  const spans: Span[] = [];
  let offset = 0;
  for (const piece of pieces) {
    spans.push({ start: offset, end: offset + piece.text.length, page: piece.page });
    offset += piece.text.length + 1;
  }
  const content = joinPieces(pieces);
  return { content, tokens: pieces.length === 1 ? pieces[0]!.tokens : countTokens(content), spans };
}

/**
 * Starts each chunk after the first with the tail of the one before: its last `percent`% of
 * characters, back to the start of the word cut, then shortened until the whole fits `budget`.
 */
function withOverlap(bodies: readonly Chunk[], percent: number, budget: number): Chunk[] {
  const out: Chunk[] = [];
  for (const body of bodies) {
    const previous = out.at(-1);
    out.push(previous ? prependTail(previous, body, percent, budget) : body);
  }
  return out;
}

function prependTail(previous: Chunk, body: Chunk, percent: number, budget: number): Chunk {
  const text = previous.content;
  let start = wordStart(text, Math.floor((text.length * (100 - percent)) / 100));
  while (start < text.length) {
    const tail = text.slice(start);
    const content = `${tail}\n${body.content}`;
    const tokens = countTokens(content);
    if (tokens <= budget) {
      const shift = tail.length + 1;
      const tailSpans = previous.spans
        .filter((span) => span.end > start)
        .map((span) => ({ start: Math.max(0, span.start - start), end: span.end - start, page: span.page }));
      const bodySpans = body.spans.map((span) => ({ start: span.start + shift, end: span.end + shift, page: span.page }));
      return { content, tokens, spans: [...tailSpans, ...bodySpans] };
    }
    // Too long (the tail's characters held more tokens than its share): drop a word or a tenth.
    start = Math.max(nextWordStart(text, start), wordStart(text, start + Math.ceil((text.length - start) / 10)));
  }
  return body;
}

/** How far a cut moves to reach a word's start; text without spaces (CJK) is cut where it is. */
const WORD_REACH = 24;

/** The start of the word that `index` falls in, when it is near; else `index`. */
function wordStart(text: string, index: number): number {
  for (let i = index; i > 0 && i > index - WORD_REACH; i--) {
    if (/\s/.test(text[i - 1]!)) return i;
  }
  return index;
}

/** The start of the next word after `index`, when it is near; else the end of the text. */
function nextWordStart(text: string, index: number): number {
  for (let i = index + 1; i < text.length && i < index + WORD_REACH; i++) {
    if (/\s/.test(text[i - 1]!) && !/\s/.test(text[i]!)) return i;
  }
  return Math.min(text.length, index + WORD_REACH);
}

function toTextChunk(chunk: Chunk): TextChunk {
  const pages = [...new Set(chunk.spans.flatMap((span) => (span.page === undefined ? [] : [span.page])))].sort((a, b) => a - b);
  const { content, tokens: token_count } = chunk;
  return pages.length > 0 ? { content, token_count, pages } : { content, token_count };
}

/**
 * Cuts `text` into parts of at most `limit` tokens each, at the last line, sentence or word
 * end that fits when one is near, else between characters. Whitespace at a cut is dropped.
 */
export function splitToBudget(text: string, limit: number): { text: string; tokens: number }[] {
  const parts: { text: string; tokens: number }[] = [];
  let rest = text;
  for (;;) {
    const cut = cutIndex(rest, limit);
    if (typeof cut !== 'number') {
      if (rest.trim() !== '') parts.push({ text: rest, tokens: cut.tokens });
      return parts;
    }
    const head = rest.slice(0, cut).trimEnd();
    if (head !== '') parts.push({ text: head, tokens: countTokens(head) });
    rest = rest.slice(cut).trimStart();
  }
}

/**
 * Where to cut `text` so its head has at most `limit` tokens, or its count when all of it fits.
 * Only a window a few times the budget is counted, so a huge piece costs linear time.
 */
function cutIndex(text: string, limit: number): number | { tokens: number } {
  let window = Math.min(text.length, limit * 8);
  let windowTokens = countTokens(text.slice(0, window));
  while (windowTokens <= limit) {
    if (window === text.length) return { tokens: windowTokens };
    window = Math.min(text.length, window * 2);
    windowTokens = countTokens(text.slice(0, window));
  }
  // Largest `fits` with countTokens(text.slice(0, fits)) <= limit; `over` does not fit.
  let fits = 0;
  let over = window;
  const probe = (index: number): void => {
    if (countTokens(text.slice(0, index)) <= limit) fits = index;
    else over = index;
  };
  const guess = Math.floor((window * limit) / windowTokens);
  if (guess > fits && guess < over) probe(guess);
  if (fits === guess && guess > 0) probe(Math.min(over - 1, Math.ceil(guess * 1.05) + 1));
  else if (over === guess) probe(Math.max(fits + 1, Math.floor(guess * 0.95)));
  while (over - fits > 1) probe(fits + Math.floor((over - fits) / 2));
  let cut = Math.max(1, fits);
  // Never between the halves of a surrogate pair (a budget below one character's tokens
  // still takes that one character).
  if (cut < text.length && isLowSurrogate(text.charCodeAt(cut))) cut += cut > 1 ? -1 : 1;
  return niceCut(text, cut, limit);
}

/** The last line, sentence or word end in the last third before `cut`, if the head still fits. */
function niceCut(text: string, cut: number, limit: number): number {
  const from = Math.floor((cut * 2) / 3);
  const head = text.slice(from, cut);
  for (const boundary of [/\n/g, /[.!?;:。！？；](?=\s)|[。！？；]/g, /\s/g]) {
    let last = -1;
    for (const match of head.matchAll(boundary)) last = match.index + match[0].length;
    const index = from + last;
    if (last > 0 && index > 0 && countTokens(text.slice(0, index)) <= limit) return index;
  }
  return cut;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
