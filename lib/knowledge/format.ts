/**
 * Retrieved chunks as a run shows them, in RAGFlow's shapes: a reference entry per chunk
 * (`chunks_format`), the knowledge text a model reads (`kb_prompt` with citation ids), the
 * instructions that ask a model to cite, and the citations read back from its answer.
 *
 * @example
 *   const text = formatChunks(result.chunks); // "\nID: 187\n├── Title: faq.md\n└── Content:\n..."
 *   ctx.addReference(result.chunks.map(chunkReference), result.doc_aggs);
 *   citedIds('Paris is the capital [ID:187].'); // ['187']
 */
import { citationKey, type RunReference } from '../canvas/run-references';
import type { RetrievedChunk } from './types';

/** RAGFlow's cap on the knowledge text one retrieval hands a model, in tokens. */
export const KNOWLEDGE_TOKEN_CAP = 200_000;

/** One chunk as a reference entry: RAGFlow's `chunks_format` fields, null where the chunk has none. */
export interface ChunkReference {
  id: string;
  content: string | null;
  document_id: string | null;
  document_name: string | null;
  dataset_id: string | null;
  image_id: string | null;
  positions: unknown;
  url: string | null;
  similarity: number | null;
  vector_similarity: number | null;
  term_similarity: number | null;
  row_id: string | null;
  doc_type: string | null;
  document_metadata: Record<string, unknown> | null;
  [field: string]: unknown;
}

/**
 * A chunk in either naming: the retriever's (`RetrievedChunk`: `chunk_id`, `docnm_kwd`) or a
 * reference's (`ChunkReference`: `id`, `document_name`).
 */
export type AnyChunk = RetrievedChunk | Readonly<Record<string, unknown>>;

/** RAGFlow's `get_value(d, k1, k2)`: the first key when present (even null), else the second. */
function field(chunk: AnyChunk, first: string, second: string): unknown {
  const c = chunk as Readonly<Record<string, unknown>>;
  return Object.hasOwn(c, first) ? c[first] : c[second];
}

function own(chunk: AnyChunk, key: string): unknown {
  return (chunk as Readonly<Record<string, unknown>>)[key];
}

const text = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const score = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** RAGFlow's `chunks_format` for one chunk. */
export function chunkReference(chunk: AnyChunk): ChunkReference {
  const metadata = own(chunk, 'document_metadata');
  return {
    id: String(field(chunk, 'chunk_id', 'id') ?? ''),
    content: text(field(chunk, 'content', 'content_with_weight')),
    document_id: text(field(chunk, 'doc_id', 'document_id')),
    document_name: text(field(chunk, 'docnm_kwd', 'document_name')),
    dataset_id: text(field(chunk, 'kb_id', 'dataset_id')),
    image_id: text(field(chunk, 'image_id', 'img_id')),
    positions: field(chunk, 'positions', 'position_int') ?? null,
    url: text(own(chunk, 'url')),
    similarity: score(own(chunk, 'similarity')),
    vector_similarity: score(own(chunk, 'vector_similarity')),
    term_similarity: score(own(chunk, 'term_similarity')),
    row_id: text(own(chunk, 'row_id')),
    doc_type: text(field(chunk, 'doc_type_kwd', 'doc_type')),
    document_metadata: typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata) ? (metadata as Record<string, unknown>) : null,
  };
}

/** The number a model cites a chunk by: RAGFlow's `hash_str2int(chunk id, 500)`, as text. */
export function citationId(chunkId: string): string {
  return citationKey(chunkId);
}

/**
 * A token count close to cl100k's for budgeting: a CJK character is about one token, other text
 * about four characters one. RAGFlow counts exactly; a cap of 200,000 tokens needs no more.
 */
export function estimateTokens(value: string): number {
  const cjk = value.match(CJK)?.length ?? 0;
  return cjk + Math.ceil((value.length - cjk) / 4);
}

const CJK = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]/g;

/**
 * RAGFlow's `kb_prompt(kbinfos, max_tokens, hash_id=True)`: one block per chunk, best first,
 * `\nID: <citation id>`, the document's title and URL, its metadata, then `\n└── Content:\n`
 * and the text; blocks stop after the one that passes 97 % of `maxTokens` (as RAGFlow's). The
 * Retrieval component's `formalized_content` is these blocks joined with "\n".
 */
export function knowledgeBlocks(chunks: readonly AnyChunk[], maxTokens = KNOWLEDGE_TOKEN_CAP): string[] {
  const blocks: string[] = [];
  let used = 0;
  for (const chunk of chunks) {
    const content = valueText(field(chunk, 'content', 'content_with_weight'));
    let block = `\nID: ${citationId(String(field(chunk, 'id', 'chunk_id') ?? ''))}`;
    block += node('Title', field(chunk, 'docnm_kwd', 'document_name'));
    block += node('URL', own(chunk, 'url'));
    const metadata = own(chunk, 'document_metadata');
    if (typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)) {
      for (const [key, value] of Object.entries(metadata)) block += node(key, value);
    }
    block += `\n└── Content:\n${content}`;
    blocks.push(block);
    used += estimateTokens(content);
    if (maxTokens * 0.97 < used) break;
  }
  return blocks;
}

/** The knowledge text of `chunks`, as Retrieval's `formalized_content`. */
export function formatChunks(chunks: readonly AnyChunk[], maxTokens = KNOWLEDGE_TOKEN_CAP): string {
  return knowledgeBlocks(chunks, maxTokens).join('\n');
}

function node(name: string, value: unknown): string {
  const line = valueText(value);
  return line ? `\n├── ${name}: ${line.replace(/\n+/g, ' ')}` : '';
}

function valueText(value: unknown): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/**
 * What a model is told when the pass has references: cite the knowledge blocks by their `ID`,
 * as `[ID:n]`, one bracket per source. Appended to the system prompt of LLM and Agent (`cite`).
 */
export function citationPrompt(): string {
  return CITATION_PROMPT;
}

const CITATION_PROMPT = `# Citing the knowledge you were given

The knowledge blocks in this conversation each start with a line \`ID: <number>\`. When a sentence of your answer states something taken from a block, cite that block.

How to cite:
- Write the block's number as [ID:n], for example [ID:12].
- Two or more sources: one bracket each, side by side, as [ID:3][ID:17]. Never put several numbers in one bracket (not [ID:3, ID:17], not [ID:3,17]).
- Put the citations at the end of the sentence they support, before its final punctuation. At most four per sentence.
- Cite only numbers that appear in an \`ID:\` line of the knowledge blocks. The numbers in these instructions are examples, not sources.
- Do not cite general knowledge, transitions, or your own reasoning; cite facts: figures, dates, names, definitions, quotations, causes and comparisons.
- Apart from the citations, write your answer as you would without them: do not change its wording, spacing or formatting to make room for them.

Example. Given the block

ID: 12
└── Content:
The bridge opened in 1932 and carries eight lanes.

a cited answer reads: The bridge opened in 1932 [ID:12]. It carries eight lanes of traffic [ID:12].`;

const CITATION = /\[\s*ID\s*[:：]\s*(\d+)((?:\s*[,，;]\s*(?:ID\s*[:：]\s*)?\d+)*)\s*\]/gi;

/**
 * The citation ids an answer cites, in order of first appearance: `[ID:12]`, `[ID: 12]`,
 * `[ID:3][ID:17]`, and the form models write although told not to, `[ID:3, ID:17]`.
 */
export function citedIds(answer: string): string[] {
  const ids = new Set<string>();
  for (const m of answer.matchAll(CITATION)) {
    ids.add(String(Number(m[1])));
    for (const more of (m[2] ?? '').matchAll(/\d+/g)) ids.add(String(Number(more[0])));
  }
  return [...ids];
}

/**
 * The part of a pass's references an answer cited: the cited chunks and their documents; or
 * undefined when it cited none of them (then every reference stays, as RAGFlow sends them).
 */
export function citedPart(reference: Readonly<RunReference>, answer: string): { chunkIds: string[]; docNames: string[] } | undefined {
  const chunkIds = citedIds(answer).filter((id) => Object.hasOwn(reference.chunks, id));
  if (chunkIds.length === 0) return undefined;
  const docNames = new Set<string>();
  for (const id of chunkIds) {
    const name = reference.chunks[id]?.document_name;
    if (typeof name === 'string') docNames.add(name);
  }
  return { chunkIds, docNames: [...docNames] };
}
