/**
 * The master key ring: the key that wraps every tenant's data key (and from which server keys
 * are derived), plus the previous keys still accepted after a rotation, each until a stated
 * time. Where it lives:
 *
 * - on AWS, an SSM SecureString parameter whose *name* is configured
 *   (EASEL_MASTER_KEY_PARAMETER), read at run time;
 * - locally, a file `.easel/master-key.json` in the working directory, made on first use
 *   (mode 0600, in a 0700 directory).
 *
 * Both hold the same text: a JSON key ring (or, for a ring of one key, the bare base64 key):
 *
 *   {"current": "<base64 of 32 bytes>",
 *    "previous": [{"key": "<base64 of 32 bytes>", "until": "2027-01-31T00:00:00.000Z"}]}
 *
 * A key's id is derived from its bytes (`mk_` + 12 hex of a hash), so a ring cannot name a key
 * wrongly. Every wrapped data key carries the id of the key that wrapped it.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { KEY_BYTES, keyIdFor, keyIdOf, newKey, open, seal } from './crypto';

export interface MasterKey {
  id: string;
  key: Buffer;
  /** Epoch ms after which a previous key is no longer accepted; absent on the current key. */
  until?: number;
}

export interface MasterKeyRing {
  current: MasterKey;
  /** Keys rotated out, newest first, each accepted until its `until`. */
  previous: MasterKey[];
}

/** Where the ring comes from. `load` may cache; it is called for every wrap and unwrap. */
export interface MasterKeySource {
  load(): Promise<MasterKeyRing>;
}

/** The master key is missing, malformed, or no longer accepts what it is asked to open. */
export class MasterKeyError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MasterKeyError';
  }
}

/** @default how long a rotated-out key stays accepted: 30 days */
export const DEFAULT_ACCEPT_PREVIOUS_MS = 30 * 86_400_000;

export function newKeyRing(): MasterKeyRing {
  const key = newKey();
  return { current: { id: keyIdFor(key), key }, previous: [] };
}

/**
 * The ring after a rotation: a fresh current key; the old one accepted for `acceptPreviousMs`
 * more (data keys it wrapped are re-wrapped when read, or by `rewrapAll`); keys already past
 * their time dropped.
 */
export function rotateKeyRing(ring: MasterKeyRing, options: { acceptPreviousMs?: number; now?: number } = {}): MasterKeyRing {
  const now = options.now ?? Date.now();
  const until = now + (options.acceptPreviousMs ?? DEFAULT_ACCEPT_PREVIOUS_MS);
  const key = newKey();
  return {
    current: { id: keyIdFor(key), key },
    previous: [{ ...ring.current, until }, ...ring.previous.filter((k) => (k.until ?? 0) > now)],
  };
}

export function parseKeyRing(text: string): MasterKeyRing {
  const trimmed = text.trim();
  if (!trimmed.startsWith('{')) return { current: keyFrom(trimmed, 'the master key'), previous: [] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    throw new MasterKeyError('the master key ring is not valid JSON');
  }
  const ring = parsed as { current?: unknown; previous?: unknown };
  if (typeof ring.current !== 'string') throw new MasterKeyError('the master key ring needs "current": a base64 key of 32 bytes');
  const previous = ring.previous ?? [];
  if (!Array.isArray(previous)) throw new MasterKeyError('"previous" of the master key ring must be a list');
  return {
    current: keyFrom(ring.current, '"current"'),
    previous: previous.map((p: { key?: unknown; until?: unknown }, i) => {
      const until = typeof p?.until === 'string' ? Date.parse(p.until) : Number.NaN;
      if (typeof p?.key !== 'string' || Number.isNaN(until)) throw new MasterKeyError(`previous.${i} of the master key ring needs "key" (base64) and "until" (an ISO time)`);
      return { ...keyFrom(p.key, `previous.${i}`), until };
    }),
  };
}

export function formatKeyRing(ring: MasterKeyRing): string {
  return `${JSON.stringify(
    {
      current: ring.current.key.toString('base64'),
      previous: ring.previous.map((k) => ({ key: k.key.toString('base64'), until: new Date(k.until ?? 0).toISOString() })),
    },
    null,
    2,
  )}\n`;
}

function keyFrom(base64: string, what: string): MasterKey {
  const key = Buffer.from(base64, 'base64');
  if (key.length !== KEY_BYTES) throw new MasterKeyError(`${what} must be the base64 of ${KEY_BYTES} random bytes`);
  return { id: keyIdFor(key), key };
}

/**
 * A local key file, made on first use with a fresh key (mode 0600). `rotate` rewrites it
 * (atomically, through a rename); other processes see the new ring within `cacheMs`.
 */
export class LocalKeyFile implements MasterKeySource {
  private cached: { ring: MasterKeyRing; at: number } | undefined;

  constructor(
    readonly path: string,
    private readonly options: { cacheMs?: number; now?: () => number } = {},
  ) {}

  async load(): Promise<MasterKeyRing> {
    const now = (this.options.now ?? Date.now)();
    if (this.cached && now - this.cached.at < (this.options.cacheMs ?? 60_000)) return this.cached.ring;
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new MasterKeyError(`cannot read the master key file ${this.path}`, { cause: error });
      text = await this.create();
    }
    const ring = parseKeyRing(text);
    this.cached = { ring, at: now };
    return ring;
  }

  /** Rotates the file's ring and returns the new one. */
  async rotate(acceptPreviousMs = DEFAULT_ACCEPT_PREVIOUS_MS): Promise<MasterKeyRing> {
    this.cached = undefined;
    const now = (this.options.now ?? Date.now)();
    const ring = rotateKeyRing(await this.load(), { acceptPreviousMs, now });
    const temp = `${this.path}.${process.pid}.tmp`;
    await writeFile(temp, formatKeyRing(ring), { mode: 0o600 });
    await rename(temp, this.path);
    this.cached = { ring, at: now };
    return ring;
  }

  private async create(): Promise<string> {
    await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
    const text = formatKeyRing(newKeyRing());
    try {
      await writeFile(this.path, text, { mode: 0o600, flag: 'wx' });
      return text;
    } catch (error) {
      // another process made it first: use theirs
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return readFile(this.path, 'utf8');
      throw new MasterKeyError(`cannot create the master key file ${this.path}`, { cause: error });
    }
  }
}

/** The ring in an SSM SecureString parameter, through a getter that caches (Powertools does). */
export class SsmKeyRing implements MasterKeySource {
  constructor(
    readonly parameterName: string,
    private readonly getParameter: (name: string) => Promise<string | undefined>,
  ) {}

  async load(): Promise<MasterKeyRing> {
    const text = await this.getParameter(this.parameterName);
    if (!text) throw new MasterKeyError(`the master key parameter ${this.parameterName} is empty or missing`);
    return parseKeyRing(text);
  }
}

/** A ring held in memory, for tests and embedding; assign `ring` to rotate. */
export class StaticKeyRing implements MasterKeySource {
  constructor(public ring: MasterKeyRing = newKeyRing()) {}

  async load(): Promise<MasterKeyRing> {
    return this.ring;
  }
}

/**
 * Wraps and unwraps data keys with the ring, and says when a wrapped key should be wrapped
 * again (it was wrapped by a previous key). Previous keys past their `until` are refused.
 */
export class MasterKeys {
  constructor(
    readonly source: MasterKeySource,
    private readonly now: () => number = Date.now,
  ) {}

  /** The ring with only the previous keys still accepted now. */
  async ring(): Promise<MasterKeyRing> {
    const ring = await this.source.load();
    const at = this.now();
    return { current: ring.current, previous: ring.previous.filter((k) => (k.until ?? 0) > at) };
  }

  async wrap(dataKey: Uint8Array, aad: string): Promise<string> {
    const { current } = await this.ring();
    return seal(current.key, current.id, dataKey, aad);
  }

  /** The data key, and whether it was wrapped by a key other than the current one. */
  async unwrap(wrapped: string, aad: string): Promise<{ key: Buffer; stale: boolean }> {
    const ring = await this.ring();
    const id = keyIdOf(wrapped);
    const master = [ring.current, ...ring.previous].find((k) => k.id === id);
    if (!master) throw new MasterKeyError(`the data key was wrapped by master key ${id}, which is no longer accepted (rotated out and past its time)`);
    return { key: open(master.key, wrapped, aad), stale: master.id !== ring.current.id };
  }
}
