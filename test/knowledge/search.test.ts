import { describe, expect, it } from 'vitest';
import { EaselError } from '../../lib/errors';
import { stem, terms } from '../../lib/knowledge/local/analyzer';
import { buildIndex, deserializeIndex, type IndexedChunk, searchIndex, serializeIndex } from '../../lib/knowledge/local/search';
import type { RetrievalQuery } from '../../lib/knowledge/types';

function chunk(id: string, content: string, extra: Partial<IndexedChunk> = {}): IndexedChunk {
  return { id, doc_id: `doc-${id}`, doc_name: `${id}.md`, kb_id: 'kb1', content, important_kwd: [], pages: [], ...extra };
}

function ask(question: string, extra: Partial<RetrievalQuery> = {}): RetrievalQuery {
  return { question, top_n: 8, top_k: 1024, similarity_threshold: 0, keywords_similarity_weight: 0.5, ...extra };
}

const ids = (result: { chunks: { chunk_id: string }[] }) => result.chunks.map((c) => c.chunk_id);

const LIBRARY = [
  chunk('refund', 'Refunds are issued within 30 days of purchase. Contact support to request a refund.', { doc_id: 'policies', doc_name: 'policies.md', pages: [2] }),
  chunk('shipping', 'Orders ship within two business days. International shipping takes longer.', { doc_id: 'policies', doc_name: 'policies.md', pages: [3, 4] }),
  chunk('warranty', 'The warranty covers manufacturing defects for one year.', { doc_id: 'warranty', doc_name: 'warranty.pdf' }),
  chunk('api', 'The API rate limit is 100 requests per minute per key.', { doc_id: 'api', doc_name: 'api.md', important_kwd: ['throttling'] }),
  chunk('zh', '知识库用于存储和检索文档。', { doc_id: 'zh', doc_name: '说明.txt' }),
];

describe('analyzer', () => {
  it('lower-cases, drops stop words and stems lightly', () => {
    expect(terms('The Indexes WERE rebuilt while indexing')).toEqual(['index', 'rebuilt', 'index']);
    expect(['ponies', 'caresses', 'hopping', 'agreed', 'rated', 'filing'].map(stem)).toEqual(['poni', 'caress', 'hop', 'agre', 'rate', 'file']);
  });

  it('keeps numbers and identifiers whole, splits sentences glued by a period', () => {
    expect(terms('pi is 3.14, see chunk_token_num.Next')).toEqual(['pi', '3.14', 'see', 'chunk_token_num', 'next']);
  });

  it("folds Latin diacritics and drops a possessive 's", () => {
    expect(terms("The café's menu")).toEqual(['cafe', 'menu']);
  });

  it('cuts CJK text into character bigrams, with single characters only on the index side', () => {
    expect(terms('知识库')).toEqual(['知识', '识库']);
    expect(terms('知识库', { unigrams: true })).toEqual(['知', '知识', '识', '识库', '库']);
    expect(terms('iPhone手机')).toEqual(['iphon', '手机']);
  });
});

describe('searchIndex', () => {
  const index = buildIndex(LIBRARY);

  it('ranks the chunk holding the question’s terms first, with RAGFlow-style scores', () => {
    const result = searchIndex(index, ask('How long do refunds take?'));
    expect(result.chunks[0]).toMatchObject({
      chunk_id: 'refund',
      doc_id: 'policies',
      docnm_kwd: 'policies.md',
      kb_id: 'kb1',
      vector_similarity: 0,
      positions: [[2, 0, 0, 0, 0]],
    });
    const best = result.chunks[0]!;
    // `how`, `do` are stop words; `long`, `refund`, `take`: the chunk has `refund` only
    expect(best.term_similarity).toBeGreaterThan(0);
    expect(best.term_similarity).toBeLessThan(1);
    expect(best.similarity).toBe(best.term_similarity);
  });

  it('scores 1 when a chunk holds every term of the question', () => {
    const [best] = searchIndex(index, ask('refund purchase')).chunks;
    expect(best?.chunk_id).toBe('refund');
    expect(best?.term_similarity).toBeCloseTo(1, 9);
  });

  it('weighs rare terms over common ones (idf)', () => {
    const corpus = buildIndex([
      chunk('a', 'common words here zebra'),
      chunk('b', 'common words there'),
      chunk('c', 'common words everywhere'),
    ]);
    const result = searchIndex(corpus, ask('common zebra'));
    expect(ids(result)).toEqual(['a', 'b', 'c']);
    const [a, b] = result.chunks;
    expect(a!.term_similarity).toBeCloseTo(1, 9);
    expect(b!.term_similarity).toBeLessThan(0.3);
  });

  it('finds chunks by their important keywords and by their document name', () => {
    expect(ids(searchIndex(index, ask('throttling')))).toEqual(['api']);
    expect(ids(searchIndex(index, ask('warranty.pdf')))[0]).toBe('warranty');
  });

  it('drops chunks below similarity_threshold', () => {
    const loose = searchIndex(index, ask('refund shipping warranty defects'));
    expect(ids(loose)).toEqual(expect.arrayContaining(['refund', 'shipping', 'warranty']));
    const threshold = loose.chunks.find((c) => c.chunk_id === 'warranty')!.similarity - 1e-9;
    const strict = searchIndex(index, ask('refund shipping warranty defects', { similarity_threshold: threshold }));
    expect(ids(strict)).toEqual(['warranty']);
    expect(strict.total).toBe(1);
  });

  it('keeps only the documents asked for (doc_ids)', () => {
    const result = searchIndex(index, ask('refund shipping warranty', { doc_ids: ['warranty'] }));
    expect(ids(result)).toEqual(['warranty']);
    expect(result.doc_aggs).toEqual([{ doc_name: 'warranty.pdf', doc_id: 'warranty', count: 1 }]);
  });

  it('considers only the top_k best candidates', () => {
    const all = searchIndex(index, ask('refund shipping warranty'));
    expect(all.total).toBe(3);
    const two = searchIndex(index, ask('refund shipping warranty', { top_k: 2 }));
    expect(two.total).toBe(2);
    expect(ids(two)).toEqual(ids(all).slice(0, 2));
  });

  it('pages by top_n, counting every passing chunk in total and doc_aggs', () => {
    const question = 'refund shipping warranty rate';
    const all = searchIndex(index, ask(question));
    expect(all.total).toBe(4);
    const first = searchIndex(index, ask(question, { top_n: 3 }));
    const second = searchIndex(index, ask(question, { top_n: 3, page: 2 }));
    const third = searchIndex(index, ask(question, { top_n: 3, page: 3 }));
    expect([...ids(first), ...ids(second)]).toEqual(ids(all));
    expect(ids(second)).toHaveLength(1);
    expect(third.chunks).toEqual([]);
    for (const page of [first, second, third]) {
      expect(page.total).toBe(4);
      expect(page.doc_aggs).toEqual(all.doc_aggs);
    }
    // both policies.md chunks count, the most counted first
    expect(all.doc_aggs[0]).toEqual({ doc_name: 'policies.md', doc_id: 'policies', count: 2 });
    expect(all.doc_aggs.map((a) => a.count)).toEqual([2, 1, 1]);
  });

  it('marks the matched terms in highlight only when asked', () => {
    const plain = searchIndex(index, ask('refund requests'));
    expect(plain.chunks[0]).not.toHaveProperty('highlight');
    const marked = searchIndex(index, ask('refund requests', { highlight: true }));
    const refund = marked.chunks.find((c) => c.chunk_id === 'refund')!;
    expect(refund.highlight).toBe('<em>Refunds</em> are issued within 30 days of purchase. Contact support to <em>request</em> a <em>refund</em>.');
    const api = marked.chunks.find((c) => c.chunk_id === 'api')!;
    expect(api.highlight).toBe('The API rate limit is 100 <em>requests</em> per minute per key.');
  });

  it('searches CJK text by bigrams and highlights the characters', () => {
    const [hit, ...rest] = searchIndex(index, ask('什么是知识库', { highlight: true })).chunks;
    expect(rest).toEqual([]);
    expect(hit?.chunk_id).toBe('zh');
    expect(hit?.highlight).toBe('<em>知识库</em>用于存储和检索文档。');
    expect(hit!.term_similarity).toBeGreaterThan(0);
    // one character finds it too: the index has the characters alone
    expect(ids(searchIndex(index, ask('库')))).toEqual(['zh']);
  });

  it('answers nothing for an empty question or one of stop words only', () => {
    for (const question of ['', '   ', 'what is the']) {
      expect(searchIndex(index, ask(question))).toEqual({ chunks: [], doc_aggs: [], total: 0 });
    }
  });

  it('answers nothing from an empty index', () => {
    expect(searchIndex(buildIndex([]), ask('refund'))).toEqual({ chunks: [], doc_aggs: [], total: 0 });
  });

  it('refuses a chunk id given twice', () => {
    expect(() => buildIndex([chunk('a', 'x'), chunk('a', 'y')])).toThrow(EaselError);
  });
});

describe('vectors', () => {
  // three axes: the question points along x
  const vectorIndex = buildIndex([
    chunk('x', 'alpha beta', { vector: [1, 0, 0] }),
    chunk('xy', 'alpha gamma', { vector: new Float32Array([1, 1, 0]) }),
    chunk('z', 'delta epsilon', { vector: [0, 0, 2] }),
    chunk('none', 'alpha beta', {}),
  ]);
  const questionVector = [2, 0, 0];

  it('combines term and cosine similarity with w = 1 - keywords_similarity_weight', () => {
    for (const weight of [0, 0.3, 0.5, 1]) {
      const result = searchIndex(vectorIndex, ask('alpha beta', { keywords_similarity_weight: weight }), questionVector);
      const xy = result.chunks.find((c) => c.chunk_id === 'xy')!;
      expect(xy.vector_similarity).toBeCloseTo(Math.SQRT1_2, 6);
      const w = 1 - weight;
      expect(xy.similarity).toBeCloseTo((1 - w) * xy.term_similarity + w * xy.vector_similarity, 9);
    }
  });

  it('finds a chunk by its vector alone, with no term in common', () => {
    const result = searchIndex(vectorIndex, ask('alpha', { keywords_similarity_weight: 0.3 }), [0, 0, 1]);
    const z = result.chunks.find((c) => c.chunk_id === 'z')!;
    expect(z.term_similarity).toBe(0);
    expect(z.vector_similarity).toBeCloseTo(1, 6);
    expect(z.similarity).toBeCloseTo(0.7, 6);
    expect(result.chunks[0]?.chunk_id).toBe('z');
  });

  it('scores by terms alone without a question vector', () => {
    const termsOnly = searchIndex(vectorIndex, ask('alpha beta'));
    for (const c of termsOnly.chunks) {
      expect(c.vector_similarity).toBe(0);
      expect(c.similarity).toBe(c.term_similarity);
    }
    // a chunk without a vector of its own scores as a zero vector, as in RAGFlow
    const hybrid = searchIndex(vectorIndex, ask('alpha beta', { keywords_similarity_weight: 0.3 }), questionVector);
    const none = hybrid.chunks.find((c) => c.chunk_id === 'none')!;
    expect(none.term_similarity).toBeCloseTo(1, 9);
    expect(none.vector_similarity).toBe(0);
    expect(none.similarity).toBeCloseTo(0.3, 9);
    expect(hybrid.chunks[0]?.chunk_id).toBe('x');
  });

  it('takes the top_k nearest chunks as vector candidates, as a brute-force ranking would', () => {
    let seed = 7;
    const next = () => ((seed = (seed * 16807) % 2147483647) / 2147483647) * 2 - 1;
    const many = Array.from({ length: 60 }, (_, n) => chunk(`c${n}`, `filler text ${n}`, { vector: [next(), next(), next(), next()] }));
    const question = [0.3, -0.2, 0.9, 0.1];
    const norm = (v: readonly number[]) => Math.hypot(...v);
    const cos = (v: readonly number[]) => v.reduce((sum, x, k) => sum + x * question[k]!, 0) / (norm(v) * norm(question));
    const expected = many
      .map((c) => ({ id: c.id, score: cos(c.vector as number[]) }))
      .sort((a, b) => b.score - a.score)
      .slice(0, 5);
    const result = searchIndex(buildIndex(many), ask('nothing matches this', { top_k: 5, keywords_similarity_weight: 0 }), question);
    expect(ids(result)).toEqual(expected.filter((e) => e.score > 0).map((e) => e.id));
    result.chunks.forEach((c, k) => expect(c.vector_similarity).toBeCloseTo(expected[k]!.score, 5));
  });

  it('refuses a question vector of another length, and chunks of mixed lengths', () => {
    expect(() => searchIndex(vectorIndex, ask('alpha'), [1, 0])).toThrow(/2 dimensions/);
    expect(() => buildIndex([chunk('a', 'x', { vector: [1, 0] }), chunk('b', 'y', { vector: [1, 0, 0] })])).toThrow(EaselError);
  });
});

describe('serialization', () => {
  const questions: [string, Partial<RetrievalQuery>, number[]?][] = [
    ['refund shipping warranty rate', { highlight: true }],
    ['知识库', {}],
    ['alpha', { keywords_similarity_weight: 0.2 }, [0, 1, 0]],
    ['refund', { doc_ids: ['policies'], top_n: 1, page: 1 }],
  ];
  const withVectors = LIBRARY.map((c, i) => ({ ...c, vector: [i, 1, i % 2] }));

  it.each([
    ['full text', LIBRARY],
    ['with vectors', withVectors],
  ])('round-trips to identical results (%s)', (_name, chunks) => {
    const built = buildIndex(chunks);
    const text = serializeIndex(built);
    const loaded = deserializeIndex(text);
    expect(loaded.size).toBe(chunks.length);
    for (const [question, extra, vector] of questions) {
      const v = chunks === withVectors ? vector : undefined;
      expect(searchIndex(loaded, ask(question, extra), v)).toEqual(searchIndex(built, ask(question, extra), v));
    }
    // and again, from what was loaded
    const reloaded = deserializeIndex(serializeIndex(loaded));
    for (const [question, extra, vector] of questions) {
      const v = chunks === withVectors ? vector : undefined;
      expect(searchIndex(reloaded, ask(question, extra), v)).toEqual(searchIndex(built, ask(question, extra), v));
    }
  });

  it('keeps only the fields it indexes', () => {
    const extra = { ...chunk('a', 'alpha'), tenant: 'someone', embedding_model: 'x' } as IndexedChunk;
    const text = serializeIndex(buildIndex([extra]));
    expect(text).not.toContain('someone');
    expect(text).not.toContain('embedding_model');
  });

  it('refuses text that is not a serialized index', () => {
    const good = JSON.parse(serializeIndex(buildIndex(LIBRARY))) as Record<string, unknown>;
    const broken = [
      JSON.stringify({ format: 'easel-local-index', version: 99, chunks: [] }),
      JSON.stringify({ ...good, text: { nonsense: true } }),
      JSON.stringify({ ...good, chunks: (good.chunks as unknown[]).slice(1) }),
    ];
    for (const text of ['', 'not json', '{}', ...broken]) {
      expect(() => deserializeIndex(text)).toThrow(EaselError);
    }
  });
});
