/**
 * 7. The local knowledge index at the size the `local` backend is for: as many chunks as one
 * knowledge base may hold (MAX_CHUNKS_PER_KB in lib/knowledge/limits.ts) of ~400 tokens,
 * ten chunks a document. The text is synthetic and deterministic: sentences of words drawn, as
 * often as they occur there, from the vocabulary of the retrieval fixture handbook
 * (test/fixtures/knowledge/corpus), so term frequencies look like prose. Measured for a
 * full-text index and for one with a 1536-dimension vector per chunk (text-embedding-3-small's
 * length): build, serialized size, load (deserialize), the memory the loaded index holds, and
 * the time of one `searchIndex` call over the fixture's questions (the question's embedding is
 * a model call, outside the index, so not timed here).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { buildIndex, deserializeIndex, type IndexedChunk, type LocalIndex, searchIndex, serializeIndex } from '../lib/knowledge/local/search';
import { countTokens, loadTokenizer } from '../lib/knowledge/tokens';
import type { RetrievalQuery } from '../lib/knowledge/types';
import { cpuMicros, fmt, heading, mean, median, p95, table } from './lib/stats';
import { seededRandom } from './lib/seeded';

export interface KnowledgeIndexOptions {
  chunks: number;
  /** Timed searches per index, after `warmupQueries` untimed ones. */
  queries: number;
  warmupQueries: number;
  dimensions: number;
}

export interface IndexFigures {
  buildMs: number;
  /** CPU time of the build: on a shared machine, steadier than the wall time. */
  buildCpuMs: number;
  serializedMb: number;
  loadMs: number;
  loadCpuMs: number;
  /** Heap and array buffers the loaded index holds, after a full collection. */
  memoryMb: number;
  queryP50Ms: number;
  queryP95Ms: number;
  queryCpuP50Ms: number;
  queryCpuP95Ms: number;
}

export interface KnowledgeIndexResult {
  chunks: number;
  /** cl100k tokens per chunk, mean over a sample. */
  tokensPerChunk: number;
  dimensions: number;
  fullText: IndexFigures;
  hybrid: IndexFigures;
}

const TOKENS_PER_CHUNK = 400;
const CHUNKS_PER_DOCUMENT = 10;
const FIXTURE = new URL('../test/fixtures/knowledge/', import.meta.url);
/** RAGFlow's Retrieval defaults. */
const QUERY = { top_n: 8, top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5 } as const satisfies Omit<RetrievalQuery, 'question'>;

export async function knowledgeIndex(options: KnowledgeIndexOptions): Promise<KnowledgeIndexResult> {
  heading(
    '7. Knowledge index (local backend)',
    `${options.chunks} synthetic chunks of ~${TOKENS_PER_CHUNK} tokens (words of the fixture handbook, drawn by frequency; seeded), ` +
      `${CHUNKS_PER_DOCUMENT} per document; full text, and full text + ${options.dimensions}-dimension vectors; ` +
      `build, serialize, load; ${options.queries} searchIndex calls per index (the fixture's questions, RAGFlow's defaults) after ${options.warmupQueries} untimed`,
  );
  await loadTokenizer();
  const words = vocabulary();
  const random = seededRandom(20_000);
  const wordsPerChunk = calibrate(words, random);
  const chunks: IndexedChunk[] = [];
  for (let i = 0; i < options.chunks; i++) {
    const doc = Math.floor(i / CHUNKS_PER_DOCUMENT);
    chunks.push({ id: `c${i}`, doc_id: `d${doc}`, doc_name: `document-${doc}.md`, kb_id: 'bench', content: prose(words, wordsPerChunk, random), important_kwd: [], pages: [] });
  }
  const sample = chunks.slice(0, Math.min(200, chunks.length));
  const tokensPerChunk = mean(sample.map((c) => countTokens(c.content)));

  const questions = fixtureQuestions();
  const fullText = measure(chunks, questions, options);
  const withVectors = chunks.map((c) => ({ ...c, vector: randomUnit(options.dimensions, random) }));
  const questionVectors = questions.map(() => Array.from(randomUnit(options.dimensions, random)));
  const hybrid = measure(withVectors, questions, options, questionVectors);

  const row = (name: string, f: IndexFigures) => [name, f.buildMs / 1000, f.buildCpuMs / 1000, f.serializedMb, f.loadMs, f.loadCpuMs, f.memoryMb, f.queryP50Ms, f.queryP95Ms, f.queryCpuP50Ms, f.queryCpuP95Ms];
  table(['index', 'build s', 'build CPU s', 'serialized MB', 'load ms', 'load CPU ms', 'memory MB', 'query p50 ms', 'query p95 ms', 'query CPU p50 ms', 'query CPU p95 ms'], [
    row('full text', fullText),
    row(`+ vectors (${options.dimensions})`, hybrid),
  ]);
  console.log(`chunks average ${fmt(tokensPerChunk, 0)} cl100k tokens (${wordsPerChunk} words); load = JSON text to a searchable index, as a warm process does after reading the blob`);
  return { chunks: options.chunks, tokensPerChunk, dimensions: options.dimensions, fullText, hybrid };
}

function measure(chunks: readonly IndexedChunk[], questions: readonly string[], options: KnowledgeIndexOptions, vectors?: readonly number[][]): IndexFigures {
  let started = performance.now();
  let cpu = cpuMicros();
  const built = buildIndex(chunks);
  const buildMs = performance.now() - started;
  const buildCpuMs = (cpuMicros() - cpu) / 1000;
  const serialized = serializeIndex(built);
  const serializedMb = Buffer.byteLength(serialized) / 1024 ** 2;

  const before = heldBytes();
  started = performance.now();
  cpu = cpuMicros();
  const index: LocalIndex = deserializeIndex(serialized);
  const loadMs = performance.now() - started;
  const loadCpuMs = (cpuMicros() - cpu) / 1000;
  const memoryMb = (heldBytes() - before) / 1024 ** 2;

  const times: number[] = [];
  const cpuTimes: number[] = [];
  for (let i = 0; i < options.warmupQueries + options.queries; i++) {
    const k = i % questions.length;
    started = performance.now();
    cpu = cpuMicros();
    searchIndex(index, { ...QUERY, question: questions[k]! }, vectors?.[k]);
    if (i < options.warmupQueries) continue;
    cpuTimes.push((cpuMicros() - cpu) / 1000);
    times.push(performance.now() - started);
  }
  if (index.size !== chunks.length) throw new Error(`the loaded index has ${index.size} chunks, not ${chunks.length}`);
  return { buildMs, buildCpuMs, serializedMb, loadMs, loadCpuMs, memoryMb, queryP50Ms: median(times), queryP95Ms: p95(times), queryCpuP50Ms: median(cpuTimes), queryCpuP95Ms: p95(cpuTimes) };
}

/** Heap plus array buffers in use after a full collection (the vectors live in array buffers). */
function heldBytes(): number {
  collect();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

let gc: (() => void) | undefined;
function collect(): void {
  if (!gc) {
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc') as () => void;
  }
  gc();
}

/** Every word of the fixture corpus, repeated as often as it occurs, so draws follow its frequencies. */
function vocabulary(): string[] {
  const dir = fileURLToPath(new URL('corpus/', FIXTURE));
  const words: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const text = readFileSync(`${dir}${name}`, 'utf8').replace(/<[^>]*>/g, ' ');
    for (const word of text.match(/[\p{L}\p{N}][\p{L}\p{N}'’-]*/gu) ?? []) words.push(word.toLowerCase());
  }
  return words;
}

function fixtureQuestions(): string[] {
  const fixture = JSON.parse(readFileSync(new URL('questions.json', FIXTURE), 'utf8')) as { questions: { question: string }[] };
  return fixture.questions.map((q) => q.question);
}

/** Words per chunk for ~TOKENS_PER_CHUNK tokens, from the tokens of a sample of sentences. */
function calibrate(words: readonly string[], random: () => number): number {
  const sample = prose(words, 4000, random);
  return Math.round((TOKENS_PER_CHUNK * 4000) / countTokens(sample));
}

/** Sentences of 8 to 20 words until `count` words. */
function prose(words: readonly string[], count: number, random: () => number): string {
  const sentences: string[] = [];
  let left = count;
  while (left > 0) {
    const length = Math.min(left, 8 + Math.floor(random() * 13));
    const sentence: string[] = [];
    for (let i = 0; i < length; i++) sentence.push(words[Math.floor(random() * words.length)]!);
    sentence[0] = sentence[0]!.charAt(0).toUpperCase() + sentence[0]!.slice(1);
    sentences.push(`${sentence.join(' ')}.`);
    left -= length;
  }
  return sentences.join(' ');
}

function randomUnit(dimensions: number, random: () => number): Float32Array {
  const vector = new Float32Array(dimensions);
  let norm = 0;
  for (let k = 0; k < dimensions; k++) {
    vector[k] = random() * 2 - 1;
    norm += vector[k]! * vector[k]!;
  }
  norm = Math.sqrt(norm);
  for (let k = 0; k < dimensions; k++) vector[k] = vector[k]! / norm;
  return vector;
}

