/**
 * Retrieval quality of the local backend on the fixture handbook (test/fixtures/knowledge: what
 * the corpus is, how the questions were written, and the thresholds, stated before any ranking
 * work). The documents go through the real parser and chunker, the index through its
 * serialized form (as the backend loads it from a blob), and the hybrid runs' vectors through
 * the real embedder and a real HTTP server, from two models: hashed bag-of-words vectors (the
 * fake the thresholds were stated for) and a real sentence encoder. Prints recall and MRR per mode.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { naiveChunk } from '../../lib/knowledge/chunk';
import { createEmbedder, type Embedder } from '../../lib/knowledge/local/embeddings';
import { buildIndex, deserializeIndex, type IndexedChunk, type LocalIndex, searchIndex, serializeIndex } from '../../lib/knowledge/local/search';
import { documentKind, parseDocument } from '../../lib/knowledge/parse';
import type { ChunkingSettings, RetrievalQuery, RetrievalResult } from '../../lib/knowledge/types';
import type { LlmSettings } from '../../lib/llm/models';
import { type EmbeddingModel, EmbeddingModelServer, hashedWords, sentenceEncoder } from './embedding-model-server';

/** As the fixture's README states them; never changed to suit a ranking. */
const THRESHOLDS = { recallAt5FullText: 0.8, recallAt5Hybrid: 0.8, minChunks: 200 } as const;
const CHUNKING: ChunkingSettings = { chunk_token_num: 128, delimiter: '`\n\n`', overlapped_percent: 0 };
/**
 * Thresholds the ranking does not meet, as measured (lib/knowledge/local/search.ts as of
 * 0053887; the fixture's README says why): with full text alone no no-answer question stays
 * below 0.2 (their best chunks score 0.23 to 0.52: a short question's framing words, "office",
 * "allowed", carry half its idf weight); with the hashed vectors recall@5 is 0.789 and 1 of 7
 * no-answer questions stays below; with the sentence encoder recall@5 is 0.93, and none of the
 * 7 stays below (their best chunks' cosines are 0.21 to 0.52: on-topic questions are near
 * on-topic paragraphs, answered or not). Each still checks its threshold as stated, as an
 * expected failure: it turns red once the ranking meets the threshold, and then leaves this list.
 */
const NOT_YET_MET: ReadonlySet<string> = new Set(['full text: no answer', 'hashed vectors: recall@5', 'hashed vectors: no answer', 'sentence encoder: no answer']);
const threshold = (key: string) => (NOT_YET_MET.has(key) ? it.fails : it);

/** RAGFlow's Retrieval defaults. */
const DEFAULT_QUERY = { top_n: 8, top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5 } as const satisfies Omit<RetrievalQuery, 'question'>;

const FIXTURE = fileURLToPath(new URL('../fixtures/knowledge/', import.meta.url));

const Answer = z.object({ doc: z.string().min(1), contains: z.string().min(1) });
const Unanswerable = z.object({ id: z.string(), question: z.string().min(1), answer: z.null(), absent: z.array(z.string().min(1)).min(1) });
const Question = z.union([z.object({ id: z.string(), question: z.string().min(1), answer: Answer }), Unanswerable]);
const Fixture = z.object({ corpus: z.string(), questions: z.array(Question), near_misses: z.array(Unanswerable) });

type Answered = { id: string; question: string; answer: z.infer<typeof Answer> };
type NoAnswer = z.infer<typeof Unanswerable>;

const fixture = Fixture.parse(JSON.parse(readFileSync(`${FIXTURE}questions.json`, 'utf8')));
const answerable = fixture.questions.filter((q): q is Answered => q.answer !== null);
const unanswerable = fixture.questions.filter((q): q is NoAnswer => q.answer === null);

/** One way of searching: the question in, the retrieval out. */
type Search = (question: string, query?: Partial<RetrievalQuery>) => Promise<RetrievalResult>;

interface Scores {
  recallAt1: number;
  recallAt5: number;
  mrr: number;
  /** Answerable questions without a hit in the first five, with the rank of their first hit (0: none in top_n). */
  misses: { id: string; rank: number; question: string }[];
  /** No-answer questions that got a chunk, with its similarity. */
  answeredUnanswerable: { id: string; similarity: number }[];
  nearMisses: { id: string; similarity: number }[];
}

/** A hit: a chunk of the answer's document that holds the answer's phrase. */
function rankOf(result: RetrievalResult, answer: Answered['answer']): number {
  const at = result.chunks.findIndex((c) => c.docnm_kwd === answer.doc && c.content_with_weight.includes(answer.contains));
  return at + 1;
}

async function score(search: Search): Promise<Scores> {
  let at1 = 0;
  let at5 = 0;
  let reciprocal = 0;
  const misses: Scores['misses'] = [];
  for (const q of answerable) {
    const rank = rankOf(await search(q.question), q.answer);
    if (rank === 1) at1++;
    if (rank >= 1 && rank <= 5) at5++;
    else misses.push({ id: q.id, rank, question: q.question });
    if (rank > 0) reciprocal += 1 / rank;
  }
  const best = async (q: NoAnswer) => ({ id: q.id, similarity: (await search(q.question)).chunks[0]?.similarity ?? 0 });
  const answeredUnanswerable = (await Promise.all(unanswerable.map(best))).filter((o) => o.similarity > 0);
  const nearMisses = await Promise.all(fixture.near_misses.map(best));
  const n = answerable.length;
  return { recallAt1: at1 / n, recallAt5: at5 / n, mrr: reciprocal / n, misses, answeredUnanswerable, nearMisses };
}

function report(mode: string, s: Scores): void {
  const f = (x: number) => x.toFixed(3);
  const lines = [
    `retrieval on the fixture handbook, ${mode}: recall@1 ${f(s.recallAt1)}, recall@5 ${f(s.recallAt5)}, MRR ${f(s.mrr)} over ${answerable.length} questions`,
    `  no-answer questions answered empty_response: ${unanswerable.length - s.answeredUnanswerable.length} of ${unanswerable.length}` +
      (s.answeredUnanswerable.length ? ` (not: ${s.answeredUnanswerable.map((o) => `${o.id} ${f(o.similarity)}`).join(', ')})` : ''),
    `  near misses, best similarity: ${s.nearMisses.map((o) => `${o.id} ${f(o.similarity)}`).join(', ')}`,
    ...s.misses.map((m) => `  outside the top 5: ${m.id} (${m.rank ? `rank ${m.rank}` : 'not in top_n'}) ${m.question}`),
  ];
  console.log(lines.join('\n'));
}

/** Every corpus file through the real parser and chunker, one IndexedChunk per chunk. */
async function chunkCorpus(): Promise<IndexedChunk[]> {
  const dir = `${FIXTURE}${fixture.corpus}`;
  const chunks: IndexedChunk[] = [];
  for (const name of readdirSync(dir).sort()) {
    const kind = documentKind(name, 'application/octet-stream');
    if (!kind) throw new Error(`${name}: not a kind of document the parser reads`);
    const doc = await parseDocument(readFileSync(`${dir}${name}`), kind);
    naiveChunk(doc, CHUNKING).forEach((chunk, i) => {
      chunks.push({ id: `${name}#${i}`, doc_id: name, doc_name: name, kb_id: 'handbook', content: chunk.content, important_kwd: [], pages: chunk.pages ?? [] });
    });
  }
  return chunks;
}

/** The index as the backend uses it: serialized into a blob, then loaded. */
function loaded(chunks: readonly IndexedChunk[]): LocalIndex {
  return deserializeIndex(serializeIndex(buildIndex(chunks)));
}

function llmSettings(baseUrl: string): LlmSettings {
  return {
    openai: { baseUrl, apiKey: 'fixture-key' },
    defaultModel: 'echo',
    models: {},
    timeoutMs: 60_000,
    retry: { attempts: 1, baseDelayMs: 0, maxDelayMs: 0 },
  };
}

const signal = new AbortController().signal;
let chunks: IndexedChunk[];
let fullTextIndex: LocalIndex;

const fullText: Search = async (question, query) => searchIndex(fullTextIndex, { ...DEFAULT_QUERY, ...query, question });

beforeAll(async () => {
  chunks = await chunkCorpus();
  fullTextIndex = loaded(chunks);
});

describe('the fixture', () => {
  it(`chunks into at least ${THRESHOLDS.minChunks} chunks, each answer's phrase in exactly one chunk of its document`, () => {
    expect(chunks.length).toBeGreaterThanOrEqual(THRESHOLDS.minChunks);
    for (const q of answerable) {
      const holding = chunks.filter((c) => c.content.includes(q.answer.contains));
      expect(holding.map((c) => c.doc_name), q.id).toEqual([q.answer.doc]);
    }
  });

  it('has no word of a no-answer question’s subject anywhere in the corpus, not even as the start of a longer word', () => {
    const text = chunks.map((c) => c.content).join('\n');
    for (const q of [...unanswerable, ...fixture.near_misses]) {
      for (const word of q.absent) expect(new RegExp(`(?<![\\p{L}\\p{N}])${word}`, 'iu').test(text), `${q.id}: ${word}`).toBe(false);
    }
  });
});

describe('full-text retrieval', () => {
  let scores: Scores;
  beforeAll(async () => {
    scores = await score(fullText);
    report('full text', scores);
  });

  threshold('full text: recall@5')(`finds the answer in the first five chunks for at least ${THRESHOLDS.recallAt5FullText} of the questions`, () => {
    expect(scores.recallAt5).toBeGreaterThanOrEqual(THRESHOLDS.recallAt5FullText);
  });

  threshold('full text: no answer')('returns no chunk at or above the default threshold for a question the corpus does not answer', () => {
    expect(scores.answeredUnanswerable).toEqual([]);
  });
});

/** A model behind the embedding server, and how long loading it and embedding the corpus may take. */
interface VectorModel {
  name: string;
  /** The model name the embedder is configured with and sends. */
  model: string;
  load: () => Promise<EmbeddingModel>;
  setupLimitMs: number;
}

const VECTOR_MODELS: VectorModel[] = [
  { name: 'hashed vectors', model: 'hashed-words', load: async () => hashedWords(), setupLimitMs: 30_000 },
  // ~10 s of CPU alone for the corpus; a loaded two-core machine may take several times that
  { name: 'sentence encoder', model: 'universal-sentence-encoder-lite', load: sentenceEncoder, setupLimitMs: 240_000 },
];

describe.each(VECTOR_MODELS)('hybrid retrieval: full text and vectors from an embedding server ($name)', (vectors) => {
  let server: EmbeddingModelServer;
  let embedder: Embedder;
  let hybridIndex: LocalIndex;
  let scores: Scores;

  const hybrid: Search = async (question, query) => {
    const [vector] = await embedder.embed([question], signal);
    return searchIndex(hybridIndex, { ...DEFAULT_QUERY, ...query, question }, vector);
  };
  /** The hybrid index with a question vector already asked for. */
  const hybridWith = (vector: readonly number[], question: string, query: Partial<RetrievalQuery>) =>
    searchIndex(hybridIndex, { ...DEFAULT_QUERY, ...query, question }, vector);

  beforeAll(async () => {
    server = await EmbeddingModelServer.start(await vectors.load());
    embedder = createEmbedder(`openai:${vectors.model}`, llmSettings(server.url));
    const chunkVectors = await embedder.embed(chunks.map((c) => c.content), signal);
    hybridIndex = loaded(chunks.map((c, i) => ({ ...c, vector: chunkVectors[i] })));
    scores = await score(hybrid);
    report(`hybrid, ${vectors.name}`, scores);
  }, vectors.setupLimitMs);

  afterAll(async () => {
    await server?.close();
  });

  it('asks the server for a vector of every chunk, and keeps them through the serialized index', async () => {
    expect(server.requests.every((r) => r.model === vectors.model && r.authorization === 'Bearer fixture-key')).toBe(true);
    expect(server.requests[0]!.input.length).toBeLessThan(chunks.length); // batched
    const texts = new Set(server.requests.flatMap((r) => r.input));
    expect(chunks.every((c) => texts.has(c.content))).toBe(true);
    const result = await hybrid(answerable[0]!.question);
    expect(result.chunks[0]!.vector_similarity).toBeGreaterThan(0);
  });

  threshold(`${vectors.name}: recall@5`)(`finds the answer in the first five chunks for at least ${THRESHOLDS.recallAt5Hybrid} of the questions`, () => {
    expect(scores.recallAt5).toBeGreaterThanOrEqual(THRESHOLDS.recallAt5Hybrid);
  });

  threshold(`${vectors.name}: no answer`)('returns no chunk at or above the default threshold for a question the corpus does not answer', () => {
    expect(scores.answeredUnanswerable).toEqual([]);
  });

  it('combines the two scores by keywords_similarity_weight, which moves the ranking as weighted', async () => {
    const everything = { similarity_threshold: 0, top_n: 20 };
    let reordered = 0;
    const questionVectors = await embedder.embed(answerable.map((q) => q.question), signal);
    for (const [k, q] of answerable.entries()) {
      const vector = questionVectors[k]!;
      const keywordsOnly = hybridWith(vector, q.question, { ...everything, keywords_similarity_weight: 1 });
      const textOnly = await fullText(q.question, everything);
      expect(keywordsOnly.chunks.map((c) => c.chunk_id), q.id).toEqual(textOnly.chunks.map((c) => c.chunk_id));

      const vectorsOnly = hybridWith(vector, q.question, { ...everything, keywords_similarity_weight: 0 });
      for (const c of vectorsOnly.chunks) expect(c.similarity).toBeCloseTo(c.vector_similarity, 6);
      const cosines = vectorsOnly.chunks.map((c) => c.vector_similarity);
      expect(cosines).toEqual([...cosines].sort((a, b) => b - a));

      const mixed = hybridWith(vector, q.question, { ...everything, keywords_similarity_weight: 0.7 });
      for (const c of mixed.chunks) expect(c.similarity).toBeCloseTo(0.7 * c.term_similarity + 0.3 * c.vector_similarity, 6);
      if (vectorsOnly.chunks[0]?.chunk_id !== keywordsOnly.chunks[0]?.chunk_id) reordered++;
    }
    // the vectors are not the keywords again: for some questions they put another chunk first
    expect(reordered).toBeGreaterThan(0);
  });
});
