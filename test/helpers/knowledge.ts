/**
 * A `RunKnowledge` of its own over a fixed set of chunks, for tests of what uses knowledge:
 * knowledge bases found by id, alias or name; a full-text score (the share of the query's
 * words a chunk has) and a stand-in for the vector score (the words' Jaccard overlap),
 * weighted as `keywords_similarity_weight` says; the threshold, `top_n` paging and the
 * per-document counts. Every call is counted; a test can make the next ones fail.
 */
import { createHash } from 'node:crypto';
import { ComponentError, TransientError } from '../../lib/canvas/errors';
import {
  DEFAULT_CHUNKING,
  type DocAgg,
  type KnowledgeBase,
  type RetrievalQuery,
  type RetrievalResult,
  type RetrievedChunk,
  type RunKnowledge,
} from '../../lib/knowledge/types';

export interface FixedBase {
  id: string;
  name: string;
  aliases?: string[];
  documents: { name: string; chunks: string[] }[];
}

interface Stored {
  chunk: Omit<RetrievedChunk, 'similarity' | 'vector_similarity' | 'term_similarity'>;
  words: Set<string>;
}

const hex = (text: string, length: number) => createHash('sha256').update(text).digest('hex').slice(0, length);

export function words(text: string): Set<string> {
  return new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []);
}

export class MemoryKnowledge implements RunKnowledge {
  readonly bases: KnowledgeBase[];
  private readonly chunks = new Map<string, Stored[]>();
  /** Every search made, in order. */
  readonly queries: { kbs: string[]; query: RetrievalQuery }[] = [];
  resolves = 0;
  private failures: Error[] = [];

  constructor(bases: readonly FixedBase[]) {
    const at = '2026-01-01T00:00:00.000Z';
    this.bases = bases.map((b) => ({
      id: b.id,
      tenant: 'test',
      name: b.name,
      description: '',
      aliases: b.aliases ?? [],
      document_count: b.documents.length,
      chunk_count: b.documents.reduce((n, d) => n + d.chunks.length, 0),
      token_count: 0,
      created_at: at,
      updated_at: at,
      backend: 'local' as const,
      local: { chunking: DEFAULT_CHUNKING },
    }));
    for (const b of bases) {
      const stored: Stored[] = [];
      for (const doc of b.documents) {
        const docId = hex(`${b.id}/${doc.name}`, 32);
        doc.chunks.forEach((content, i) => {
          stored.push({
            chunk: {
              chunk_id: hex(`${docId}/${i}`, 16),
              content_with_weight: content,
              doc_id: docId,
              docnm_kwd: doc.name,
              kb_id: b.id,
              important_kwd: [],
              image_id: '',
              positions: [],
              doc_type_kwd: '',
            },
            words: words(content),
          });
        });
      }
      this.chunks.set(b.id, stored);
    }
  }

  get retrieves(): number {
    return this.queries.length;
  }

  /** The next searches fail with these errors, in order. */
  failNext(...errors: Error[]): void {
    this.failures.push(...errors);
  }

  async resolve(idsOrNames: readonly string[]): Promise<{ found: KnowledgeBase[]; missing: string[] }> {
    this.resolves++;
    const found: KnowledgeBase[] = [];
    const missing: string[] = [];
    for (const key of idsOrNames) {
      const kb = this.bases.find((b) => b.id === key || b.aliases.includes(key)) ?? this.bases.find((b) => b.name === key);
      if (!kb) missing.push(key);
      else if (!found.includes(kb)) found.push(kb);
    }
    return { found, missing };
  }

  async retrieve(kbs: readonly KnowledgeBase[], query: RetrievalQuery, signal: AbortSignal): Promise<RetrievalResult> {
    this.queries.push({ kbs: kbs.map((k) => k.id), query: { ...query } });
    const failure = this.failures.shift();
    if (failure) throw failure;
    if (signal.aborted) throw new TransientError('the search was cancelled');
    const asked = words(query.question);
    const w = query.keywords_similarity_weight;
    const scored: RetrievedChunk[] = [];
    for (const kb of kbs) {
      const stored = this.chunks.get(kb.id);
      if (!stored) throw new ComponentError(`knowledge base ${kb.id} is not searchable here`);
      for (const s of stored) {
        const shared = [...asked].filter((x) => s.words.has(x)).length;
        const term = asked.size === 0 ? 0 : shared / asked.size;
        const union = new Set([...asked, ...s.words]).size;
        const vector = union === 0 ? 0 : shared / union;
        const similarity = round(w * term + (1 - w) * vector);
        if (similarity < query.similarity_threshold) continue;
        scored.push({ ...s.chunk, similarity, term_similarity: round(term), vector_similarity: round(vector) });
      }
    }
    scored.sort((a, b) => b.similarity - a.similarity);
    const page = query.page ?? 1;
    const chunks = scored.slice((page - 1) * query.top_n, page * query.top_n);
    const aggs = new Map<string, DocAgg>();
    for (const c of scored) {
      const agg = aggs.get(c.doc_id) ?? { doc_name: c.docnm_kwd, doc_id: c.doc_id, count: 0 };
      agg.count++;
      aggs.set(c.doc_id, agg);
    }
    return { chunks, doc_aggs: [...aggs.values()].sort((a, b) => b.count - a.count), total: scored.length };
  }
}

function round(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

/** Two knowledge bases about a small town, for tests that need something to find. */
export function townKnowledge(): MemoryKnowledge {
  return new MemoryKnowledge([
    {
      id: 'a5aaec4a819b11f095f1047c16ec874f',
      name: 'town-facts',
      aliases: ['65cb5150819b11f08347047c16ec874f'],
      documents: [
        { name: 'bridge.md', chunks: ['The old bridge opened in 1932 and carries eight lanes.', 'The bridge was painted red in 1998.'] },
        { name: 'library.md', chunks: ['The library opens at nine and closes at six.'] },
      ],
    },
    {
      id: '60c53ed89acc11f0bc1e7a2a6d0b2755',
      name: 'town-weather',
      documents: [{ name: 'climate.md', chunks: ['Winters in the town are cold and snowy.', 'Summers are mild, rarely above 25 degrees.'] }],
    },
  ]);
}
