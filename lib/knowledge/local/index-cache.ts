/**
 * Loaded local indexes, kept per warm process and keyed by the hash of their serialized text:
 * an index is immutable once built, so a hash names one index for good and needs no
 * invalidation — a rebuild has a new hash, and the old entry ages out. Least recently used
 * entries go first once the estimated bytes pass the budget; one index larger than the whole
 * budget is served but not kept. Concurrent loads of one hash share a single read.
 *
 * @example
 *   const cache = new IndexCache(256 * 1024 * 1024);
 *   const index = await cache.load(hash, async () => ({ index: deserializeIndex(text), bytes: estimateIndexBytes(text) }));
 */
import type { LocalIndex } from './search';

export interface IndexCacheStats {
  entries: number;
  bytes: number;
  hits: number;
  misses: number;
}

/**
 * The memory a loaded index takes, estimated from its serialized length: the chunks' text is
 * held again as JS strings, MiniSearch's postings are of the order of the text, vectors are 4
 * bytes a dimension. Measured (bench/knowledge-local.ts, after a full GC): 1.5 to 1.7 times the
 * serialized length at 10,000 to 20,000 chunks with vectors and at 20,000 without; up to 3 or 4
 * for small indexes, where a fixed overhead of some tens of MB weighs more. 2 is taken, so the
 * largest index (10,000 chunks with vectors, 91 MB serialized) fits the default budget.
 */
export function estimateIndexBytes(serializedLength: number): number {
  return serializedLength * 2;
}

export class IndexCache {
  readonly #maxBytes: number;
  /** In recency order: the first is the least recently used. */
  readonly #entries = new Map<string, { index: LocalIndex; bytes: number }>();
  readonly #loading = new Map<string, Promise<LocalIndex | undefined>>();
  #bytes = 0;
  #hits = 0;
  #misses = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  get(hash: string): LocalIndex | undefined {
    const entry = this.#entries.get(hash);
    if (!entry) return undefined;
    this.#entries.delete(hash);
    this.#entries.set(hash, entry);
    return entry.index;
  }

  set(hash: string, index: LocalIndex, bytes: number): void {
    const old = this.#entries.get(hash);
    if (old) {
      this.#entries.delete(hash);
      this.#bytes -= old.bytes;
    }
    if (bytes > this.#maxBytes) return;
    this.#entries.set(hash, { index, bytes });
    this.#bytes += bytes;
    for (const [key, entry] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#entries.delete(key);
      this.#bytes -= entry.bytes;
    }
  }

  /** The cached index, or what `loader` gives (kept); undefined when the loader finds none. */
  async load(hash: string, loader: () => Promise<{ index: LocalIndex; bytes: number } | undefined>): Promise<LocalIndex | undefined> {
    const cached = this.get(hash);
    if (cached) {
      this.#hits++;
      return cached;
    }
    const pending = this.#loading.get(hash);
    if (pending) {
      this.#hits++;
      return pending;
    }
    this.#misses++;
    const loading = (async () => {
      const loaded = await loader();
      if (loaded) this.set(hash, loaded.index, loaded.bytes);
      return loaded?.index;
    })();
    this.#loading.set(hash, loading);
    try {
      return await loading;
    } finally {
      this.#loading.delete(hash);
    }
  }

  stats(): IndexCacheStats {
    return { entries: this.#entries.size, bytes: this.#bytes, hits: this.#hits, misses: this.#misses };
  }
}
