/**
 * Server keys: key material that features sign or derive tokens from (run tokens, form links),
 * kept by the master key mechanism. A server key is derived (HKDF-SHA256) from each master key
 * of the ring and a purpose, so rotating the master key rotates every server key with it: the
 * current key signs; the previous ones still verify until the time their master key is accepted
 * (`until` in the ring), and no longer after.
 *
 * @example
 *   const keys = await serverKey(master, 'run-token');
 *   const mac = createHmac('sha256', keys.current.key).update(data).digest(); // sign with current
 *   const key = findServerKey(keys, idFromToken)?.key;                        // verify with its key
 */
import { hkdfSync } from 'node:crypto';
import type { MasterKeys } from './master-key';

export interface ServerKeyVersion {
  /** The id of the master key it comes from: put it in what it signs, to find the key again. */
  id: string;
  key: Buffer;
  /** Epoch ms after which it no longer verifies; absent on the current key. */
  until?: number;
}

export interface ServerKeySet {
  current: ServerKeyVersion;
  previous: ServerKeyVersion[];
}

const PURPOSE = /^[a-z][a-z0-9_.-]{0,63}$/;

export async function serverKey(master: MasterKeys, purpose: string): Promise<ServerKeySet> {
  if (!PURPOSE.test(purpose)) throw new RangeError(`a server key purpose is 1-64 characters of [a-z0-9_.-], got "${purpose}"`);
  const ring = await master.ring();
  const derive = (k: { id: string; key: Buffer; until?: number }): ServerKeyVersion => ({
    id: k.id,
    key: Buffer.from(hkdfSync('sha256', k.key, 'easel server key', purpose, 32)),
    ...(k.until === undefined ? {} : { until: k.until }),
  });
  return { current: derive(ring.current), previous: ring.previous.map(derive) };
}

/** The key of this id if it still verifies (current, or previous within its time). */
export function findServerKey(keys: ServerKeySet, id: string): ServerKeyVersion | undefined {
  return [keys.current, ...keys.previous].find((k) => k.id === id);
}
