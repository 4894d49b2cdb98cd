/**
 * Token counts as RAGFlow makes them: tiktoken's `cl100k_base`, exact (gpt-tokenizer's port,
 * checked against tiktoken's ranks). Text that looks like a special token (`<|endoftext|>`)
 * is counted as ordinary text, as a document's content should be.
 *
 * The encoder's ranks (~1 MB of data, ~130 ms to build) load on the first `loadTokenizer()`,
 * never at module load, so importing this file costs nothing on the turn path. Counting is
 * synchronous once loaded; `parseDocument` loads it, so parse-then-chunk needs nothing more.
 *
 * @example
 *   await loadTokenizer();
 *   countTokens('hello world'); // 2
 */

type CountFn = (text: string) => number;

let count: CountFn | undefined;
let loading: Promise<void> | undefined;

/** Loads the cl100k encoder once per process; later calls return at once. */
export function loadTokenizer(): Promise<void> {
  loading ??= import('gpt-tokenizer/encoding/cl100k_base').then(
    (encoding) => {
      const ordinary = { disallowedSpecial: new Set<string>() };
      count = (text) => encoding.countTokens(text, ordinary);
    },
    (error: unknown) => {
      loading = undefined;
      throw error;
    },
  );
  return loading;
}

/** Whether `countTokens` can be called. */
export function tokenizerLoaded(): boolean {
  return count !== undefined;
}

/** The number of cl100k_base tokens in `text`. Call `loadTokenizer()` first (once per process). */
export function countTokens(text: string): number {
  if (!count) throw new Error('the tokenizer is not loaded: await loadTokenizer() before counting tokens');
  return text === '' ? 0 : count(text);
}
