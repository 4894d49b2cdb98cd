/** The per-process cache of loaded local indexes: LRU by estimated bytes, one load per hash at a time. */
import { describe, expect, it } from 'vitest';
import { IndexCache } from '../../lib/knowledge/local/index-cache';
import type { LocalIndex } from '../../lib/knowledge/local/search';

const index = (size: number): LocalIndex => ({ size });

describe('IndexCache', () => {
  it('drops the least recently used once past its bytes, and keeps nothing larger than all of them', () => {
    const cache = new IndexCache(100);
    cache.set('a', index(1), 40);
    cache.set('b', index(2), 40);
    expect(cache.get('a')?.size).toBe(1); // a is now the most recent
    cache.set('c', index(3), 40);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')?.size).toBe(1);
    expect(cache.get('c')?.size).toBe(3);
    expect(cache.stats()).toMatchObject({ entries: 2, bytes: 80 });
    cache.set('huge', index(4), 101);
    expect(cache.get('huge')).toBeUndefined();
    expect(cache.stats()).toMatchObject({ entries: 2, bytes: 80 });
    // setting a hash again replaces its entry, not adds to it
    cache.set('a', index(1), 50);
    expect(cache.stats()).toMatchObject({ entries: 2, bytes: 90 });
  });

  it('loads each hash once, also for loads at the same time, and keeps no miss', async () => {
    const cache = new IndexCache(1000);
    let loads = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const loader = async () => {
      loads++;
      await gate;
      return { index: index(7), bytes: 10 };
    };
    const both = Promise.all([cache.load('h', loader), cache.load('h', loader)]);
    release();
    expect((await both).map((i) => i?.size)).toEqual([7, 7]);
    expect(await cache.load('h', loader)).toMatchObject({ size: 7 });
    expect(loads).toBe(1);
    expect(await cache.load('gone', async () => undefined)).toBeUndefined();
    expect(await cache.load('gone', async () => ({ index: index(8), bytes: 1 }))).toMatchObject({ size: 8 });
    expect(cache.stats()).toMatchObject({ hits: 2, misses: 3, entries: 2 });
  });
});
