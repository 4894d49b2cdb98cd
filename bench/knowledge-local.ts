/**
 * `npm run bench:knowledge-local -- [--chunks=10000] [--dims=1024] [--store-chunks=5000]`:
 * the local knowledge backend at the size it is meant for (MAX_CHUNKS_PER_KB), to set and check
 * its limits (lib/knowledge/limits.ts) and the index cache's byte estimate (index-cache.ts).
 *
 * 1. In memory: `--chunks` chunks of ~300 words (~400 tokens) drawn, seeded, from a Zipfian
 *    vocabulary of 30,000 words; full text only, then with a `--dims` vector per chunk. Build,
 *    serialize, brotli (what the blob stores), load, the heap a loaded index holds (after a full
 *    GC; needs --expose-gc), and query latency over 200 questions. Times are CPU time.
 * 2. Through the store on DynamoDB Local (or EASEL_DYNAMODB_ENDPOINT): `--store-chunks` chunk
 *    items with vectors written as parses write them, then one rebuild of the index (read every
 *    chunk, build, write the blob, move the pointer) and a first retrieval in a fresh process
 *    cache (pointer, blob, load, search), with the capacity DynamoDB reports. Wall times.
 */
import { createHash } from 'node:crypto';
import { brotliCompressSync, constants } from 'node:zlib';
import { LocalBackend } from '../lib/knowledge/local/backend';
import { IndexCache } from '../lib/knowledge/local/index-cache';
import { buildIndex, deserializeIndex, type IndexedChunk, searchIndex, serializeIndex } from '../lib/knowledge/local/search';
import { MAX_CHUNKS_PER_KB } from '../lib/knowledge/limits';
import { createKnowledge } from '../lib/knowledge/service';
import type { RetrievalQuery } from '../lib/knowledge/types';
import { DEFAULT_RETRY } from '../lib/llm/retry';
import { SsrfGuard } from '../lib/outbound/ssrf';
import type { StoreContext } from '../lib/store/dynamo';
import { writeBlobs } from '../lib/store/blobs';
import { finishParse, putDocument, readKnowledgeChunks, startParse, type StoredChunk, writeChunks } from '../lib/store/knowledge-documents';
import { cpuMicros, fmt, heading, median, p95, table } from './lib/stats';
import { openDatabase } from './lib/stack';
import { seededRandom } from './lib/seeded';

const args = new Map(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=') as [string, string]));
const CHUNKS = Number(args.get('chunks') ?? MAX_CHUNKS_PER_KB);
const DIMS = Number(args.get('dims') ?? 1024);
const STORE_CHUNKS = Number(args.get('store-chunks') ?? 5000);
const WORDS = 300;
const gc = (globalThis as { gc?: () => void }).gc;

// ---- corpus -------------------------------------------------------------------------------------


const random = seededRandom(42);
const SYLLABLES = ['ka', 'lo', 'mi', 'ren', 'sta', 'vo', 'pe', 'dar', 'is', 'tu', 'gen', 'ol', 'bri', 'an', 'ex', 'um'];
const vocabulary = Array.from({ length: 30_000 }, (_, i) => {
  let word = '';
  for (let n = i + 7; n > 0; n = Math.floor(n / SYLLABLES.length)) word += SYLLABLES[n % SYLLABLES.length];
  return word;
});
// Zipf's law: the word of rank r drawn with probability ~ 1/r
const cumulative = (() => {
  const out = new Float64Array(vocabulary.length);
  let total = 0;
  for (let r = 0; r < vocabulary.length; r++) out[r] = total += 1 / (r + 1);
  return out.map((x) => x / total);
})();
const word = () => {
  const x = random();
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((cumulative[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return vocabulary[lo] as string;
};
const sentence = (n: number) => Array.from({ length: n }, word).join(' ');

function chunks(count: number, dims: number, kbId: string): IndexedChunk[] {
  return Array.from({ length: count }, (_, i) => ({
    id: createHash('sha256').update(`c${i}`).digest('hex').slice(0, 32),
    doc_id: `doc${Math.floor(i / 100)}`,
    doc_name: `document ${Math.floor(i / 100)}.pdf`,
    kb_id: kbId,
    content: Array.from({ length: WORDS / 15 }, () => `${sentence(15)}.`).join(' '),
    important_kwd: [],
    pages: [1 + (i % 100)],
    ...(dims > 0 ? { vector: Float32Array.from({ length: dims }, () => random() - 0.5) } : {}),
  }));
}

const query = (question: string): RetrievalQuery => ({ question, top_n: 8, top_k: 1024, similarity_threshold: 0.2, keywords_similarity_weight: 0.5 });
const ms = (micros: number) => micros / 1000;
const mb = (bytes: number) => bytes / 1024 / 1024;

function heapBytes(): number {
  gc?.();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

// ---- 1. in memory -------------------------------------------------------------------------------

function inMemory(dims: number) {
  const corpus = chunks(CHUNKS, dims, 'k'.repeat(32));
  let t = cpuMicros();
  const built = buildIndex(corpus);
  const buildMs = ms(cpuMicros() - t);
  t = cpuMicros();
  const text = serializeIndex(built);
  const serializeMs = ms(cpuMicros() - t);
  t = cpuMicros();
  const compressed = brotliCompressSync(Buffer.from(text), { params: { [constants.BROTLI_PARAM_QUALITY]: 5, [constants.BROTLI_PARAM_SIZE_HINT]: text.length } });
  const brotliMs = ms(cpuMicros() - t);
  const before = heapBytes();
  t = cpuMicros();
  const loaded = deserializeIndex(text);
  const loadMs = ms(cpuMicros() - t);
  const held = heapBytes() - before;
  const questions = Array.from({ length: 200 }, () => sentence(4));
  const vector = dims > 0 ? Array.from({ length: dims }, () => random() - 0.5) : undefined;
  const latencies = questions.map((q) => {
    const start = cpuMicros();
    searchIndex(loaded, query(q), vector);
    return ms(cpuMicros() - start);
  });
  return {
    label: dims > 0 ? `${CHUNKS} chunks + ${dims}-dim vectors` : `${CHUNKS} chunks, full text`,
    buildMs,
    serializeMs,
    chars: text.length,
    brotli: compressed.length,
    brotliMs,
    loadMs,
    held,
    p50: median(latencies),
    p95: p95(latencies),
  };
}

// ---- 2. through the store -----------------------------------------------------------------------

async function throughStore() {
  const db = await openDatabase();
  const units = { read: 0, write: 0 };
  const store: StoreContext = { doc: db.doc, table: db.table, onCapacity: (_op, u) => ((units.read += u.read), (units.write += u.write)) };
  const llm = { defaultModel: 'echo', models: {}, timeoutMs: 10_000, retry: DEFAULT_RETRY };
  const tenant = `bench${Date.now().toString(36)}`;
  try {
    const admin = createKnowledge({ store, guard: new SsrfGuard(), secretsFor: () => async () => undefined, llm });
    const kb = await admin.create(tenant, { name: 'bench', backend: 'local' });
    const corpus = chunks(STORE_CHUNKS, DIMS, kb.id);
    const perDoc = 100;
    let started = Date.now();
    for (let d = 0; d * perDoc < corpus.length; d++) {
      const docId = createHash('sha256').update(`d${d}`).digest('hex').slice(0, 32);
      const at = new Date().toISOString();
      await putDocument(store, tenant, { id: docId, kb_id: kb.id, name: `d${d}.txt`, size: 1, mime_type: 'text/plain', sha256: '', status: 'UNSTART', progress: 0, progress_msg: '', chunk_count: 0, token_count: 0, created_at: at, updated_at: at }, new Uint8Array([1]), 10_000);
      const run = `r${d}`;
      const doc = await startParse(store, tenant, kb.id, docId, run, at);
      const mine: StoredChunk[] = corpus.slice(d * perDoc, (d + 1) * perDoc).map((c, i) => ({
        id: c.id, doc_id: docId, index: i, content: c.content, token_count: 400, pages: c.pages, important_kwd: [], available: true,
        ...(c.vector ? { vector: c.vector as Float32Array } : {}),
      }));
      await writeChunks(store, tenant, kb.id, run, mine);
      await finishParse(store, tenant, doc, run, { status: 'DONE', chunk_count: mine.length, token_count: mine.length * 400, message: '' }, { at, maxChunks: MAX_CHUNKS_PER_KB });
    }
    const writeMs = Date.now() - started;
    const writeUnits = units.write;
    units.read = units.write = 0;
    // the rebuild's steps one by one, then the whole of it as a parse runs it
    const steps: [string, number, { read: number; write: number }][] = [];
    const step = async <T>(name: string, run: () => Promise<T> | T): Promise<T> => {
      units.read = units.write = 0;
      const at = Date.now();
      const out = await run();
      steps.push([name, Date.now() - at, { ...units }]);
      return out;
    };
    const source = await step('rebuild 1/3: read every chunk item', () => readKnowledgeChunks(store, tenant, kb.id));
    const text = await step('rebuild 2/3: build and serialize the index', () =>
      serializeIndex(buildIndex(source.chunks.map((c) => ({ id: c.id, doc_id: c.doc_id, doc_name: '', kb_id: kb.id, content: c.content, important_kwd: [], pages: c.pages, ...(c.vector ? { vector: c.vector } : {}) })))));
    const hash = createHash('sha256').update(text).digest('hex');
    await step('rebuild 3/3: compress and write the blob', () => writeBlobs(store, `T#${tenant}#KB#${kb.id}`, new Map([[hash, text]])));
    const backend = new LocalBackend({ store, llm, now: Date.now, cache: new IndexCache(1 << 30) });
    units.read = units.write = 0;
    let started2 = Date.now();
    await backend.rebuildIndex(tenant, kb.id);
    const rebuildMs = Date.now() - started2;
    const rebuild = { ...units };
    units.read = units.write = 0;
    const fresh = new LocalBackend({ store, llm, now: Date.now, cache: new IndexCache(1 << 30) });
    const stored = (await admin.get(tenant, kb.id)) as Extract<Awaited<ReturnType<typeof admin.get>>, { backend: 'local' }>;
    started2 = Date.now();
    await fresh.search(tenant, stored, query(sentence(4)), undefined);
    const coldMs = Date.now() - started2;
    const cold = { ...units };
    started = Date.now();
    await fresh.search(tenant, stored, query(sentence(4)), undefined);
    const warmMs = Date.now() - started;
    await admin.delete(tenant, kb.id);
    return { description: db.description, writeMs, writeUnits, steps, rebuildMs, rebuild, coldMs, cold, warmMs };
  } finally {
    await db.stop();
  }
}

// ---- report -------------------------------------------------------------------------------------

heading('local index in memory', `${CHUNKS} chunks of ~${WORDS} words; CPU time; heap after a full GC${gc ? '' : ' (NOT measured: run with --expose-gc)'}`);
const rows = [inMemory(0), inMemory(DIMS)];
table(
  ['index', 'build ms', 'serialize ms', 'serialized MB', 'brotli MB', 'brotli ms', 'load ms', 'heap MB', 'heap / serialized', 'query p50 ms', 'query p95 ms'],
  rows.map((r) => [r.label, r.buildMs, r.serializeMs, mb(r.chars), mb(r.brotli), r.brotliMs, r.loadMs, gc ? mb(r.held) : '-', gc ? fmt(r.held / r.chars) : '-', r.p50, r.p95]),
);

const s = await throughStore();
heading('local index through the store', `${STORE_CHUNKS} chunk items with ${DIMS}-dim vectors on ${s.description}; wall time`);
table(
  ['step', 'ms', 'read units', 'write units'],
  [
    [`write ${STORE_CHUNKS} chunks as parses do`, s.writeMs, '-', s.writeUnits],
    ...s.steps.map(([name, time, u]) => [name, time, u.read, u.write] as [string, number, number, number]),
    ['rebuild, whole (LocalBackend.rebuildIndex)', s.rebuildMs, s.rebuild.read, s.rebuild.write],
    ['first retrieval in a fresh process (pointer, blob, load, search)', s.coldMs, s.cold.read, s.cold.write],
    ['next retrieval (cached)', s.warmMs, '-', '-'],
  ],
);
