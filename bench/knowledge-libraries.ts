/**
 * `npm run bench:knowledge [-- --chunks=20000 --queries=200 --only=minisearch,flexsearch,easel]`: the two
 * full-text libraries considered for the local knowledge index, side by side on its workload,
 * with the same analyzer (lib/knowledge/local/analyzer.ts) so the engines are what differs:
 *
 * - MiniSearch 7 (BM25, a radix tree, JSON serialization);
 * - FlexSearch 0.8 (a contextual, position-scored index; key-by-key export);
 * - and Easel's `searchIndex` on MiniSearch, which re-scores the candidates RAGFlow's way.
 *
 * Corpus: the Markdown of node_modules (READMEs and docs: real English, code and tables), cut
 * into sections at headings and into chunks of ~300 words (~400 tokens); then filled up to
 * `--chunks` with chunks of sentences drawn (seeded) from the unlabelled sections, which makes
 * realistic distractors. Labelled sample: headings that occur once in the corpus and have two
 * terms or more are the questions, with the heading removed from the text; the chunks of that
 * section are the relevant ones. Quality: hit@10 (a relevant chunk in the first ten) and MRR@10.
 *
 * Times are CPU time of the process (user + system), not wall time, so a busy machine does not
 * inflate them. Memory is the heap and array buffers a built index holds after a full GC (needs
 * --expose-gc; without it, the column says so). Prints its method and a table.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import FlexSearch from 'flexsearch';
import MiniSearch from 'minisearch';
import { terms } from '../lib/knowledge/local/analyzer';
import { buildIndex, deserializeIndex, type IndexedChunk, type LocalIndex, searchIndex, serializeIndex } from '../lib/knowledge/local/search';
import { fmt, heading, median, p95, table } from './lib/stats';
import { seededRandom } from './lib/seeded';

const args = new Map(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=') as [string, string]));
const TARGET_CHUNKS = Number(args.get('chunks') ?? 20_000);
const QUERIES = Number(args.get('queries') ?? 200);
const WORDS_PER_CHUNK = 300;
const TOP = 10;

// ---- corpus ---------------------------------------------------------------------------------

interface Section {
  heading: string;
  body: string;
}

interface Labelled {
  question: string;
  relevant: Set<string>;
}

function markdownFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const stat = statSync(path, { throwIfNoEntry: false });
      if (!stat) continue;
      if (stat.isDirectory()) walk(path);
      else if (/\.md$/i.test(name) && !/change|history|license|security|code_of_conduct/i.test(name) && stat.size > 1_000) out.push(path);
    }
  };
  walk(root);
  return out;
}

function sections(text: string): Section[] {
  const out: Section[] = [];
  let current: Section = { heading: '', body: '' };
  for (const line of text.split('\n')) {
    const match = /^#{1,4}\s+(.+?)\s*#*\s*$/.exec(line);
    if (match) {
      if (current.body.trim()) out.push(current);
      current = { heading: match[1]!.replace(/[`*_[\]]/g, ''), body: '' };
    } else current.body += `${line}\n`;
  }
  if (current.body.trim()) out.push(current);
  return out;
}

function wordChunks(text: string): string[] {
  const words = text.split(/\s+/).filter(Boolean);
  const out: string[] = [];
  for (let i = 0; i < words.length; i += WORDS_PER_CHUNK) out.push(words.slice(i, i + WORDS_PER_CHUNK).join(' '));
  return out;
}


function corpus(): { chunks: IndexedChunk[]; labelled: Labelled[]; realChunks: number } {
  const seen = new Set<string>();
  const files: { file: string; sections: Section[] }[] = [];
  for (const file of markdownFiles('node_modules')) {
    const text = readFileSync(file, 'utf8');
    const hash = createHash('sha256').update(text).digest('hex');
    if (seen.has(hash)) continue;
    seen.add(hash);
    files.push({ file: file.replace(/^node_modules\//, ''), sections: sections(text) });
  }
  const all = files.flatMap((f) => f.sections);
  const headingCount = new Map<string, number>();
  for (const s of all) headingCount.set(s.heading.toLowerCase(), (headingCount.get(s.heading.toLowerCase()) ?? 0) + 1);
  const rand = seededRandom(42);
  const candidates = all.filter(
    (s) => headingCount.get(s.heading.toLowerCase()) === 1 && new Set(terms(s.heading)).size >= 2 && s.body.split(/\s+/).length >= 40,
  );
  const chosen = new Set<number>();
  while (chosen.size < Math.min(QUERIES, candidates.length)) chosen.add(Math.floor(rand() * candidates.length));
  const labelledSections = new Set([...chosen].map((i) => candidates[i]!));

  // as a chunker would: a file's sections run together into chunks of ~WORDS_PER_CHUNK words;
  // a labelled section (without its heading) gets chunks of its own, so its chunks are known
  const chunks: IndexedChunk[] = [];
  const labelled: Labelled[] = [];
  const sentences: string[] = [];
  files.forEach(({ file, sections: list }, n) => {
    const add = (text: string) => wordChunks(text).map((content) => {
      const id = `doc${n}-${chunks.length}`;
      chunks.push({ id, doc_id: `doc${n}`, doc_name: file, kb_id: 'bench', content, important_kwd: [], pages: [] });
      return id;
    });
    let running = '';
    for (const s of list) {
      if (labelledSections.has(s)) {
        labelled.push({ question: s.heading, relevant: new Set(add(s.body)) });
        continue;
      }
      running += `${s.heading}\n${s.body}\n`;
      sentences.push(...s.body.split(/(?<=[.!?])\s+/).filter((t) => t.split(/\s+/).length >= 4));
    }
    if (running.trim()) add(running);
  });
  const realChunks = chunks.length;
  for (let n = 0; chunks.length < TARGET_CHUNKS; n++) {
    let content = '';
    while (content.split(/\s+/).length < WORDS_PER_CHUNK) content += `${sentences[Math.floor(rand() * sentences.length)]} `;
    chunks.push({ id: `filler${n}`, doc_id: `filler${Math.floor(n / 20)}`, doc_name: `filler${Math.floor(n / 20)}.md`, kb_id: 'bench', content, important_kwd: [], pages: [] });
  }
  return { chunks, labelled, realChunks };
}

// ---- the contenders -------------------------------------------------------------------------

interface Contender {
  name: string;
  build(chunks: readonly IndexedChunk[]): unknown;
  serialize(index: unknown): string;
  load(text: string): unknown;
  /** Chunk ids, best first, at most TOP. */
  search(index: unknown, question: string): string[];
}

function miniSearch(chunks: readonly IndexedChunk[]): Contender {
  const options = {
    fields: ['content', 'title'],
    tokenize: (text: string) => terms(text, { unigrams: true }),
    processTerm: (t: string) => t,
  };
  return {
    name: 'MiniSearch 7.2.0',
    build(list) {
      const index = new MiniSearch<{ id: number; content: string; title: string }>(options);
      index.addAll(list.map((c, id) => ({ id, content: c.content, title: c.doc_name })));
      return index;
    },
    serialize: (index) => JSON.stringify(index),
    load: (text) => MiniSearch.loadJSON(text, options),
    search: (index, question) =>
      (index as MiniSearch)
        .search(terms(question).join(' '), { tokenize: (q) => q.split(' '), processTerm: (t) => t, boost: { title: 2 } })
        .slice(0, TOP)
        .map((r) => chunks[r.id as number]!.id),
  };
}

function flexSearch(chunks: readonly IndexedChunk[]): Contender {
  const options = { tokenize: 'strict' as const, resolution: 9, encode: (text: string) => terms(text, { unigrams: true }) };
  const make = () => new FlexSearch.Index(options);
  return {
    name: 'FlexSearch 0.8.212',
    build(list) {
      const index = make();
      list.forEach((c, id) => index.add(id, `${c.doc_name}\n${c.content}`));
      return index;
    },
    serialize(index) {
      const parts: Record<string, string> = {};
      void (index as ReturnType<typeof make>).export((key: string, data: string) => {
        parts[key] = data;
      });
      return JSON.stringify(parts);
    },
    load(text) {
      const index = make();
      for (const [key, data] of Object.entries(JSON.parse(text) as Record<string, string>)) index.import(key, data);
      return index;
    },
    search: (index, question) =>
      ((index as ReturnType<typeof make>).search(question, { limit: TOP, suggest: true }) as number[]).map((id) => chunks[id]!.id),
  };
}

function easel(): Contender {
  return {
    name: 'Easel searchIndex (MiniSearch + RAGFlow scores)',
    build: (list) => buildIndex(list),
    serialize: (index) => serializeIndex(index as LocalIndex),
    load: (text) => deserializeIndex(text),
    search: (index, question) =>
      searchIndex(index as LocalIndex, { question, top_n: TOP, top_k: 1024, similarity_threshold: 0, keywords_similarity_weight: 1 }).chunks.map((c) => c.chunk_id),
  };
}

// ---- measuring --------------------------------------------------------------------------------

const gc = (globalThis as { gc?: () => void }).gc;

/** CPU time of this process in ms: the machine is shared, so wall time would measure the neighbours. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

function heldBytes(): number {
  gc?.();
  gc?.();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

interface Row {
  name: string;
  buildMs: number;
  heldMb: number | undefined;
  serializedMb: number;
  loadMs: number;
  p50: number;
  p95: number;
  hit: number;
  mrr: number;
}

function measure(contender: Contender, chunks: readonly IndexedChunk[], labelled: readonly Labelled[]): Row {
  const before = heldBytes();
  let start = cpuMs();
  let index: unknown = contender.build(chunks);
  const buildMs = cpuMs() - start;
  const held = heldBytes() - before;

  const text = contender.serialize(index);
  index = undefined;
  start = cpuMs();
  const loaded = contender.load(text);
  const loadMs = cpuMs() - start;

  // quality on the loaded index: the one a warm process serves from
  let hits = 0;
  let reciprocal = 0;
  for (const { question, relevant } of labelled) {
    const ranked = contender.search(loaded, question);
    const at = ranked.findIndex((id) => relevant.has(id));
    if (at >= 0) {
      hits++;
      reciprocal += 1 / (at + 1);
    }
  }
  const latencies: number[] = [];
  for (let round = 0; round < 3; round++) {
    for (const { question } of labelled) {
      const t = cpuMs();
      contender.search(loaded, question);
      latencies.push(cpuMs() - t);
    }
  }
  return {
    name: contender.name,
    buildMs,
    heldMb: gc ? held / 2 ** 20 : undefined,
    serializedMb: Buffer.byteLength(text) / 2 ** 20,
    loadMs,
    p50: median(latencies),
    p95: p95(latencies),
    hit: hits / labelled.length,
    mrr: reciprocal / labelled.length,
  };
}

const { chunks, labelled, realChunks } = corpus();
heading(
  'Full-text libraries for the local knowledge index',
  `${chunks.length} chunks of ~${WORDS_PER_CHUNK} words (${realChunks} from node_modules Markdown, the rest sentences drawn from it), ` +
    `${labelled.length} labelled questions (unique headings, removed from their text); the same analyzer for all; ` +
    `CPU ms; latency over ${3 * labelled.length} searches of the loaded index${gc ? '' : '; run with --expose-gc for memory'}`,
);
const contenders = { minisearch: () => miniSearch(chunks), flexsearch: () => flexSearch(chunks), easel };
const chosen = (args.get('only') ?? Object.keys(contenders).join(',')).split(',') as (keyof typeof contenders)[];
const rows = chosen.map((name) => measure(contenders[name](), chunks, labelled));
table(
  ['library', 'build ms', 'held MB', 'serialized MB', 'load ms', 'query p50 ms', 'query p95 ms', `hit@${TOP}`, `MRR@${TOP}`],
  rows.map((r) => [r.name, Math.round(r.buildMs), r.heldMb === undefined ? '-' : fmt(r.heldMb, 1), fmt(r.serializedMb, 1), Math.round(r.loadMs), fmt(r.p50, 2), fmt(r.p95, 2), fmt(r.hit, 3), fmt(r.mrr, 3)]),
);
