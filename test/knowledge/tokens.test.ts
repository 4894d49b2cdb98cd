import { join } from 'node:path';
import { build, type Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { naiveChunk } from '../../lib/knowledge/chunk';
import { parseDocument } from '../../lib/knowledge/parse';
import { countTokens, loadTokenizer, tokenizerLoaded } from '../../lib/knowledge/tokens';

const root = join(import.meta.dirname, '../..');

/** Packages an entry reaches through static imports only (esbuild's view, as it bundles). */
async function staticPackages(entry: string): Promise<string[]> {
  const { metafile } = await build({
    entryPoints: [join(root, entry)],
    absWorkingDir: root,
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    outdir: join(root, '.probe-out'),
    logLevel: 'silent',
  });
  const inputs = (metafile as Metafile).inputs;
  const found = new Set<string>();
  const seen = new Set<string>();
  const walk = (path: string): void => {
    if (seen.has(path)) return;
    seen.add(path);
    for (const imported of inputs[path]?.imports ?? []) {
      if (imported.kind !== 'import-statement') continue;
      if (imported.external) found.add(imported.path);
      else walk(imported.path);
    }
  };
  walk(entry);
  return [...found];
}

// The order matters: the first tests run before anything in this file loads the tokenizer.
describe('loading on first use', () => {
  it('importing the parsers and the chunker loads neither the tokenizer nor PDF.js', () => {
    expect(tokenizerLoaded()).toBe(false);
    expect((globalThis as { pdfjsWorker?: unknown }).pdfjsWorker).toBeUndefined();
    expect(() => countTokens('x')).toThrow('the tokenizer is not loaded: await loadTokenizer() before counting tokens');
    expect(() => naiveChunk({ sections: [{ text: 'x' }] }, { chunk_token_num: 8, delimiter: '\n', overlapped_percent: 0 })).toThrow(/not loaded/);
  });

  it.each(['lib/knowledge/parse/index.ts', 'lib/knowledge/chunk.ts', 'lib/knowledge/tokens.ts'])(
    '%s imports the tokenizer and PDF.js only dynamically',
    async (entry) => {
      const packages = await staticPackages(entry);
      expect(packages.filter((name) => name.startsWith('gpt-tokenizer') || name.startsWith('pdfjs-dist'))).toEqual([]);
    },
  );

  it('loads once: concurrent callers share the load', async () => {
    await Promise.all([loadTokenizer(), loadTokenizer(), parseDocument(new TextEncoder().encode('x'), 'text')]);
    expect(tokenizerLoaded()).toBe(true);
  });
});

describe('countTokens (cl100k_base)', () => {
  // Token ids published for cl100k_base (OpenAI's cookbook, "How to count tokens with tiktoken").
  it.each([
    ['tiktoken is great!', 6],
    ['antidisestablishmentarianism', 6],
    ['2 + 2 = 4', 7],
    ['お誕生日おめでとう', 9],
    ['hello world', 2],
    ['', 0],
  ])('%j has %d tokens', (text, tokens) => {
    expect(countTokens(text)).toBe(tokens);
  });

  it('counts special-token text as ordinary text', () => {
    expect(countTokens('<|endoftext|>')).toBe(7);
    expect(countTokens('a <|im_start|> b')).toBeGreaterThan(3);
  });
});
