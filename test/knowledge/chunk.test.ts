import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { hasWrappedDelimiter, naiveChunk, normalizeOverlapPercent, parseDelimiterField, splitToBudget } from '../../lib/knowledge/chunk';
import { countTokens, loadTokenizer } from '../../lib/knowledge/tokens';
import { type ChunkingSettings, DEFAULT_CHUNKING, type ParsedDocument, type TextChunk } from '../../lib/knowledge/types';

beforeAll(() => loadTokenizer());

const settings = (overrides: Partial<ChunkingSettings>): ChunkingSettings => ({ ...DEFAULT_CHUNKING, ...overrides });
const doc = (...texts: string[]): ParsedDocument => ({ sections: texts.map((text) => ({ text })) });
const nonSpace = (text: string): string => text.replace(/\s+/g, '');

/** Every chunk within budget, its count right, none blank. */
function expectHonest(chunks: TextChunk[], budget: number): void {
  for (const chunk of chunks) {
    expect(chunk.token_count).toBe(countTokens(chunk.content));
    expect(chunk.token_count).toBeLessThanOrEqual(budget);
    expect(chunk.content.trim()).not.toBe('');
  }
}

/** Sentences of ~`words` words each, one per line: ~1.3 tokens a word. */
function lines(count: number, words = 12, seed = 1): string[] {
  const vocabulary = ['alpha', 'beta', 'gamma', 'delta', 'knowledge', 'retrieval', 'chunk', 'token', 'budget', 'overlap', 'page', 'naive'];
  return Array.from({ length: count }, (_, line) =>
    Array.from({ length: words }, (_, word) => vocabulary[(line * 7 + word * 5 + seed) % vocabulary.length]).join(' ') + '.',
  );
}

describe('parseDelimiterField (RAGFlow delim.py)', () => {
  it.each([
    ['\n', ['\n']],
    ['\n!?;。；！？', ['\n', '!', '?', ';', '。', '；', '！', '？']],
    ['`##`', ['##']],
    ['\n`##`#', ['##', '\n', '#']],
    ['`\n\n`\n', ['\n\n', '\n']],
    ['\r\n', ['\n']],
    ['aa`ab`a', ['ab', 'a']],
    ['', []],
  ])('%j gives %j', (field, delimiters) => {
    expect(parseDelimiterField(field)).toEqual(delimiters);
  });

  it('only a backtick run is custom mode', () => {
    expect(hasWrappedDelimiter('`##`')).toBe(true);
    expect(hasWrappedDelimiter('\n!?')).toBe(false);
    expect(hasWrappedDelimiter('`')).toBe(false);
  });
});

describe('normalizeOverlapPercent (RAGFlow float_utils)', () => {
  it.each([
    [0, 0],
    [-5, 0],
    [0.25, 25],
    [1, 1],
    [33.9, 33],
    [90, 90],
    [95, 90],
    [Number.NaN, 0],
  ])('%d is %d', (value, percent) => {
    expect(normalizeOverlapPercent(value)).toBe(percent);
  });
});

describe('naiveChunk: merging', () => {
  it('keeps the indentation of a piece’s first line', () => {
    const code = 'def f():\n    return 1\n\n\n    # trailing comment   \n';
    expect(naiveChunk(doc(code), settings({ delimiter: '`\n\n`' })).map((chunk) => chunk.content)).toEqual(['def f():\n    return 1', '    # trailing comment']);
  });

  it('merges short lines into one chunk, joined by newlines, blank lines dropped', () => {
    const chunks = naiveChunk(doc('first line\n\n  \nsecond line\r\nthird line'), DEFAULT_CHUNKING);
    expect(chunks).toEqual([{ content: 'first line\nsecond line\nthird line', token_count: countTokens('first line\nsecond line\nthird line') }]);
  });

  it('fills each chunk up to its budget and never past it', () => {
    const text = lines(200).join('\n');
    const chunks = naiveChunk(doc(text), settings({ chunk_token_num: 64 }));
    expectHonest(chunks, 64);
    // Greedy: a chunk and the next line would not have fitted.
    const pieces = text.split('\n');
    let next = 0;
    for (const [i, chunk] of chunks.entries()) {
      const taken = chunk.content.split('\n').length;
      next += taken;
      if (i < chunks.length - 1) expect(countTokens(`${chunk.content}\n${pieces[next]}`)).toBeGreaterThan(64);
    }
    expect(next).toBe(pieces.length);
    expect(chunks.map((chunk) => chunk.content).join('\n')).toBe(text);
  });

  it('merges across sections', () => {
    const chunks = naiveChunk(doc('one', 'two', 'three'), DEFAULT_CHUNKING);
    expect(chunks.map((chunk) => chunk.content)).toEqual(['one\ntwo\nthree']);
  });

  it('gives nothing for a document without text', () => {
    expect(naiveChunk(doc(), DEFAULT_CHUNKING)).toEqual([]);
    expect(naiveChunk(doc(' \n\t', ''), DEFAULT_CHUNKING)).toEqual([]);
  });

  it('takes a budget that is not a positive number as the default', () => {
    const text = lines(100).join('\n');
    expect(naiveChunk(doc(text), settings({ chunk_token_num: 0 }))).toEqual(naiveChunk(doc(text), DEFAULT_CHUNKING));
  });
});

describe('naiveChunk: pieces over budget', () => {
  it('cuts a long line at word ends, each part within budget', () => {
    const line = lines(1, 3000)[0]!;
    const chunks = naiveChunk(doc(line), settings({ chunk_token_num: 100 }));
    expect(chunks.length).toBeGreaterThan(30);
    expectHonest(chunks, 100);
    expect(chunks.map((chunk) => chunk.content).join(' ')).toBe(line);
    // Nearly full: a cut is never far before the budget.
    for (const chunk of chunks.slice(0, -1)) expect(chunk.token_count).toBeGreaterThan(80);
  });

  it('prefers sentence ends over word ends', () => {
    const text = Array.from({ length: 40 }, (_, i) => `Sentence number ${i} says a few more words here.`).join(' ');
    const chunks = naiveChunk(doc(text), settings({ chunk_token_num: 50 }));
    expectHonest(chunks, 50);
    for (const chunk of chunks) expect(chunk.content).toMatch(/\.$/);
  });

  it('cuts text without spaces between characters, never inside a surrogate pair', () => {
    const text = '数据知识库😀检索'.repeat(300);
    const chunks = naiveChunk(doc(text), settings({ chunk_token_num: 40 }));
    expectHonest(chunks, 40);
    expect(chunks.map((chunk) => chunk.content).join('')).toBe(text);
    for (const chunk of chunks) expect(chunk.content).not.toMatch(/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/);
  });

  it('splitToBudget leaves text within budget whole and cuts a huge one in linear time', () => {
    expect(splitToBudget('short text', 10)).toEqual([{ text: 'short text', tokens: 2 }]);
    const huge = 'x'.repeat(2_000_000);
    const parts = splitToBudget(huge, 512);
    expect(parts.map((part) => part.text).join('')).toBe(huge);
    for (const part of parts) expect(part.tokens).toBeLessThanOrEqual(512);
  });
});

describe('naiveChunk: overlap', () => {
  const text = lines(120).join('\n');

  it('starts each chunk with the tail of the one before, within budget', () => {
    const chunks = naiveChunk(doc(text), settings({ chunk_token_num: 80, overlapped_percent: 20 }));
    expectHonest(chunks, 80);
    for (let i = 1; i < chunks.length; i++) {
      const previous = chunks[i - 1]!.content;
      const current = chunks[i]!.content;
      // The longest tail of the previous chunk that starts this one, up to a line end.
      let length = previous.length;
      while (length > 0 && !(current.startsWith(previous.slice(-length)) && current[length] === '\n')) length--;
      const overlap = previous.slice(-length);
      expect(overlap).not.toBe('');
      // About a fifth of the previous chunk, from a word start.
      expect(overlap.length).toBeGreaterThan(previous.length * 0.1);
      expect(overlap.length).toBeLessThan(previous.length * 0.3);
      expect(previous[previous.length - overlap.length - 1]).toMatch(/\s/);
    }
  });

  it('reserves the overlap in the budget, so bodies are smaller', () => {
    const plain = naiveChunk(doc(text), settings({ chunk_token_num: 80 }));
    const overlapped = naiveChunk(doc(text), settings({ chunk_token_num: 80, overlapped_percent: 50 }));
    expect(overlapped.length).toBeGreaterThan(plain.length);
    expectHonest(overlapped, 80);
  });

  it('has no overlap in custom-delimiter mode, as RAGFlow', () => {
    const chunks = naiveChunk(doc('Q1 one\n##Q2 two\n##Q3 three'), settings({ delimiter: '`##`', overlapped_percent: 50 }));
    expect(chunks.map((chunk) => chunk.content)).toEqual(['Q1 one', 'Q2 two', 'Q3 three']);
  });
});

describe('naiveChunk: delimiters', () => {
  it('splits at each delimiter character and drops it', () => {
    const text = 'one! two? three。four';
    expect(naiveChunk(doc(text), settings({ delimiter: '!?。', chunk_token_num: 1 })).map((chunk) => chunk.content)).toEqual(['one', ' two', ' three', 'four']);
    // Merged, the pieces are joined by newlines, as RAGFlow joins them.
    expect(naiveChunk(doc(text), settings({ delimiter: '!?。', chunk_token_num: 3 })).map((chunk) => chunk.content)).toEqual(['one\n two', ' three\nfour']);
  });

  it('takes regular-expression characters literally', () => {
    for (const delimiter of ['-', '.', '*', '|', '\\', '/', '(', ']', '$', '^', '{', '?']) {
      const text = `a${delimiter}b${delimiter}c`;
      expect(naiveChunk(doc(text), settings({ delimiter, chunk_token_num: 1 })).map((chunk) => chunk.content), delimiter).toEqual(['a', 'b', 'c']);
    }
    expect(naiveChunk(doc('a.*b.*c'), settings({ delimiter: '`.*`', chunk_token_num: 1 })).map((chunk) => chunk.content)).toEqual(['a', 'b', 'c']);
  });

  it('keeps every segment of a backtick delimiter as its own chunk, longest delimiter first', () => {
    const text = '## Q: first?\nA: yes.\n## Q: second?\nA: no.\n# not a split';
    const chunks = naiveChunk(doc(text), settings({ delimiter: '`## `' }));
    expect(chunks.map((chunk) => chunk.content)).toEqual(['Q: first?\nA: yes.', 'Q: second?\nA: no.\n# not a split']);
    expect(naiveChunk(doc('a##b#c'), settings({ delimiter: '`##`#' })).map((chunk) => chunk.content)).toEqual(['a', 'b', 'c']);
  });

  it('still cuts an oversized segment in custom mode', () => {
    const chunks = naiveChunk(doc(`${lines(1, 400)[0]}##short`), settings({ delimiter: '`##`', chunk_token_num: 100 }));
    expectHonest(chunks, 100);
    expect(chunks.at(-1)!.content).toBe('short');
  });

  it('with an empty delimiter merges nothing and cuts only by budget', () => {
    const text = lines(50).join('\n');
    const chunks = naiveChunk(doc(text), settings({ delimiter: '', chunk_token_num: 100 }));
    expectHonest(chunks, 100);
    expect(nonSpace(chunks.map((chunk) => chunk.content).join(''))).toBe(nonSpace(text));
  });
});

describe('naiveChunk: pages', () => {
  const pdf: ParsedDocument = {
    sections: [
      { text: lines(6).join('\n'), page: 1 },
      { text: lines(6, 12, 2).join('\n'), page: 2 },
      { text: lines(30, 12, 3).join('\n'), page: 3 },
    ],
  };

  it('lists the pages a chunk’s text came from', () => {
    const chunks = naiveChunk(pdf, settings({ chunk_token_num: 120 }));
    expect(chunks.map((chunk) => chunk.pages)).toEqual([[1, 2], [2, 3], [3], [3], [3], [3]]);
  });

  it('counts the overlap’s page too', () => {
    const chunks = naiveChunk(pdf, settings({ chunk_token_num: 200, overlapped_percent: 30 }));
    expect(chunks[0]!.pages).toEqual([1, 2]);
    expect(chunks[1]!.pages).toEqual([2, 3]);
    expect(chunks.at(-1)!.pages).toEqual([3]);
  });

  it('has no pages when the document has none', () => {
    expect(naiveChunk(doc('a\nb'), DEFAULT_CHUNKING)[0]).not.toHaveProperty('pages');
  });
});

describe('naiveChunk: properties', () => {
  const word = fc.oneof(
    fc.constantFrom('alpha', 'beta', 'knowledge', 'retrieval', 'x', '42', 'naïve', '数据', '知识库', '😀', 'C++', '<|endoftext|>'),
    fc.string({ minLength: 1, maxLength: 12 }),
  );
  const separator = fc.constantFrom(' ', ' ', ' ', '\n', '\n\n', '\t', '. ', '。', '##', '\r\n');
  const text = fc.array(fc.tuple(word, separator), { maxLength: 300 }).map((parts) => parts.map(([w, s]) => w + s).join(''));
  const section = fc.record({ text, page: fc.option(fc.integer({ min: 1, max: 50 }), { nil: undefined }) });
  const document = fc.array(section, { maxLength: 4 }).map((sections): ParsedDocument => ({ sections }));
  const delimiter = fc.constantFrom('\n', '\n。', '`##`', '\n`##`', '', '!?', '-.|', '`. `');
  const budget = fc.integer({ min: 8, max: 300 });

  it('without overlap loses no text: the chunks hold every piece’s non-space characters, in order', () => {
    fc.assert(
      fc.property(document, delimiter, budget, (source, field, chunk_token_num) => {
        const chunks = naiveChunk(source, { chunk_token_num, delimiter: field, overlapped_percent: 0 });
        const delimiters = parseDelimiterField(field);
        const expected = source.sections
          .map((s) => delimiters.reduce((rest, d) => rest.split(d).join(' '), s.text.replace(/\r\n?/g, '\n')))
          .join(' ');
        expect(nonSpace(chunks.map((chunk) => chunk.content).join(''))).toBe(nonSpace(expected));
      }),
      { numRuns: 150 },
    );
  });

  it('keeps every chunk within budget, with or without overlap, and gives the same chunks twice', () => {
    fc.assert(
      fc.property(document, delimiter, budget, fc.integer({ min: 0, max: 90 }), (source, field, chunk_token_num, overlapped_percent) => {
        const config = { chunk_token_num, delimiter: field, overlapped_percent };
        const chunks = naiveChunk(source, config);
        expectHonest(chunks, chunk_token_num);
        const pages = new Set(source.sections.flatMap((s) => (s.page === undefined ? [] : [s.page])));
        for (const chunk of chunks) for (const page of chunk.pages ?? []) expect(pages.has(page)).toBe(true);
        expect(naiveChunk(source, config)).toEqual(chunks);
      }),
      { numRuns: 150 },
    );
  });
});
