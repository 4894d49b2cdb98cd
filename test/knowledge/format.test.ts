import { describe, expect, it } from 'vitest';
import { chunkReference, citationId, citationPrompt, citedIds, citedPart, estimateTokens, formatChunks, knowledgeBlocks } from '../../lib/knowledge/format';
import type { RetrievedChunk } from '../../lib/knowledge/types';

function chunk(id: string, content: string, extra: Partial<RetrievedChunk> = {}): RetrievedChunk {
  return {
    chunk_id: id,
    content_with_weight: content,
    doc_id: `doc-${id}`,
    docnm_kwd: `${id}.md`,
    kb_id: 'kb1',
    important_kwd: [],
    image_id: '',
    similarity: 0.5,
    vector_similarity: 0.4,
    term_similarity: 0.6,
    positions: [[1, 2, 3, 4, 5]],
    doc_type_kwd: '',
    ...extra,
  };
}

describe('citationId', () => {
  it('is RAGFlow’s hash_str2int(id, 500): int(sha1 hex) % 500', () => {
    // values computed with Python: int(hashlib.sha1(s.encode()).hexdigest(), 16) % 500
    expect(citationId('abc')).toBe('17');
    expect(citationId('4a6c2b0e8d1f3a57')).toBe('398');
    expect(citationId('chunk-1')).toBe('336');
    expect(citationId('日本語')).toBe('114');
  });
});

describe('chunkReference', () => {
  it('has chunks_format’s fields, null where the chunk has none', () => {
    expect(chunkReference(chunk('c1', 'Text.', { url: 'https://x.example/a' }))).toEqual({
      id: 'c1',
      content: 'Text.',
      document_id: 'doc-c1',
      document_name: 'c1.md',
      dataset_id: 'kb1',
      image_id: '',
      positions: [[1, 2, 3, 4, 5]],
      url: 'https://x.example/a',
      similarity: 0.5,
      vector_similarity: 0.4,
      term_similarity: 0.6,
      row_id: null,
      doc_type: '',
      document_metadata: null,
    });
  });

  it('reads a reference’s own names too (id, content, document_name)', () => {
    const again = chunkReference(chunkReference(chunk('c2', 'More.')));
    expect(again).toMatchObject({ id: 'c2', content: 'More.', document_id: 'doc-c2', document_name: 'c2.md', dataset_id: 'kb1' });
  });
});

describe('formatChunks', () => {
  it('writes kb_prompt’s blocks with citation ids, joined with newlines', () => {
    const text = formatChunks([
      chunk('abc', 'The bridge opened in 1932.'),
      chunk('chunk-1', 'Line one.\nLine two.', { docnm_kwd: 'two\n\nlines.md', url: 'https://x.example/b' }),
    ]);
    expect(text).toBe(
      '\nID: 17\n├── Title: abc.md\n└── Content:\nThe bridge opened in 1932.' +
        '\n' +
        '\nID: 336\n├── Title: two lines.md\n├── URL: https://x.example/b\n└── Content:\nLine one.\nLine two.',
    );
  });

  it('lists a document’s metadata as nodes and leaves out empty ones', () => {
    const [block] = knowledgeBlocks([{ ...chunk('abc', 'x', { docnm_kwd: '' }), document_metadata: { author: 'Ada', year: 1843 } }]);
    expect(block).toBe('\nID: 17\n├── author: Ada\n├── year: 1843\n└── Content:\nx');
  });

  it('stops after the block that passes 97 % of the token cap', () => {
    const long = 'word '.repeat(400); // about 500 tokens
    const blocks = knowledgeBlocks([chunk('a', long), chunk('b', long), chunk('c', long), chunk('d', long)], 1000);
    expect(blocks).toHaveLength(2);
    expect(estimateTokens(long)).toBe(500);
    expect(estimateTokens('日本語')).toBe(3);
  });
});

describe('citations', () => {
  it('reads [ID:n] in every form models write it', () => {
    expect(citedIds('One [ID:12]. Two [ID: 3][ID:17]. Three [id:4, ID:5]. Again [ID:12]. Not [ID] or ID:9.')).toEqual(['12', '3', '17', '4', '5']);
    expect(citedIds('no citations')).toEqual([]);
  });

  it('picks the cited chunks and their documents, or nothing when none of them is cited', () => {
    const reference = {
      chunks: { '17': chunkReference(chunk('abc', 'x')), '336': chunkReference(chunk('chunk-1', 'y')) },
      doc_aggs: { 'abc.md': { doc_name: 'abc.md', doc_id: 'doc-abc', count: 1 }, 'chunk-1.md': { doc_name: 'chunk-1.md', doc_id: 'doc-chunk-1', count: 1 } },
    };
    expect(citedPart(reference, 'Yes [ID:336].')).toEqual({ chunkIds: ['336'], docNames: ['chunk-1.md'] });
    expect(citedPart(reference, 'Made up [ID:499].')).toBeUndefined();
    expect(citedPart(reference, 'Nothing cited.')).toBeUndefined();
  });

  it('asks for [ID:n] citations, one bracket each, in our own words', () => {
    const prompt = citationPrompt();
    expect(prompt).toContain('[ID:n]');
    expect(prompt).toContain('[ID:3][ID:17]');
    expect(prompt).not.toContain('Based on the provided document or chat history');
  });
});
