import { createHmac } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyIdOf, newKey, open, SealError, seal } from '../../lib/secrets/crypto';
import {
  formatKeyRing,
  LocalKeyFile,
  MasterKeyError,
  MasterKeys,
  newKeyRing,
  parseKeyRing,
  rotateKeyRing,
  StaticKeyRing,
} from '../../lib/secrets/master-key';
import { redactSecrets, REDACTED } from '../../lib/secrets/redact';
import { findServerKey, serverKey } from '../../lib/secrets/server-keys';

const DAY = 86_400_000;

describe('seal / open (AES-256-GCM)', () => {
  const key = newKey();

  it('carries the key id and opens only with the key and the associated data it was sealed for', () => {
    const sealed = seal(key, 'dk7', 'hello', 'tenant-a/X');
    expect(sealed).toMatch(/^easel1\.dk7\.[A-Za-z0-9_-]+$/);
    expect(keyIdOf(sealed)).toBe('dk7');
    expect(open(key, sealed, 'tenant-a/X').toString()).toBe('hello');
    expect(() => open(key, sealed, 'tenant-b/X')).toThrow(SealError);
    expect(() => open(newKey(), sealed, 'tenant-a/X')).toThrow(SealError);
    const tampered = sealed.slice(0, -2) + (sealed.endsWith('A') ? 'BB' : 'AA');
    expect(() => open(key, tampered, 'tenant-a/X')).toThrow(SealError);
  });

  it('never seals the same value to the same text (fresh IV)', () => {
    expect(seal(key, 'k', 'same', 'a')).not.toBe(seal(key, 'k', 'same', 'a'));
  });
});

describe('master key ring', () => {
  it('round-trips through its text form, and accepts a bare base64 key', () => {
    const ring = rotateKeyRing(newKeyRing(), { now: 0, acceptPreviousMs: DAY });
    const back = parseKeyRing(formatKeyRing(ring));
    expect(back.current.id).toBe(ring.current.id);
    expect(back.previous.map((k) => [k.id, k.until])).toEqual([[ring.previous[0]?.id, DAY]]);
    expect(parseKeyRing(newKey().toString('base64')).previous).toEqual([]);
    expect(() => parseKeyRing('c2hvcnQ=')).toThrow(MasterKeyError);
    expect(() => parseKeyRing('{"current": 1}')).toThrow(/current/);
  });

  it('after a rotation unwraps what the previous key wrapped until its time, and says it is stale', async () => {
    let now = 1_000;
    const source = new StaticKeyRing();
    const master = new MasterKeys(source, () => now);
    const dataKey = newKey();
    const wrapped = await master.wrap(dataKey, 'aad');
    expect(keyIdOf(wrapped)).toBe(source.ring.current.id);
    source.ring = rotateKeyRing(source.ring, { now, acceptPreviousMs: DAY });
    expect(await master.unwrap(wrapped, 'aad')).toEqual({ key: dataKey, stale: true });
    expect(keyIdOf(await master.wrap(dataKey, 'aad'))).toBe(source.ring.current.id);
    now += DAY + 1;
    await expect(master.unwrap(wrapped, 'aad')).rejects.toThrow(/no longer accepted/);
  });
});

describe('local key file', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'easel-keys-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is made on first use with mode 0600 in a 0700 directory, and kept across instances', async () => {
    const path = join(dir, '.easel', 'master-key.json');
    const first = await new LocalKeyFile(path).load();
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, '.easel'))).mode & 0o777).toBe(0o700);
    expect((await new LocalKeyFile(path).load()).current.id).toBe(first.current.id);
  });

  it('rotates: a new current key, the old one kept as previous with its time', async () => {
    const path = join(dir, 'rotate', 'master-key.json');
    const file = new LocalKeyFile(path, { now: () => 5_000 });
    const before = await file.load();
    const after = await file.rotate(7 * DAY);
    expect(after.current.id).not.toBe(before.current.id);
    expect(after.previous).toEqual([{ ...before.current, until: 5_000 + 7 * DAY }]);
    expect(parseKeyRing(await readFile(path, 'utf8')).current.id).toBe(after.current.id);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });
});

describe('server keys', () => {
  it('derive per purpose from the ring; the previous key verifies for its time after a rotation, then not', async () => {
    let now = 0;
    const source = new StaticKeyRing();
    const master = new MasterKeys(source, () => now);
    const before = await serverKey(master, 'run-token');
    expect(before.current.key).toHaveLength(32);
    expect((await serverKey(master, 'form-link')).current.key.equals(before.current.key)).toBe(false);
    expect((await serverKey(master, 'run-token')).current.key.equals(before.current.key)).toBe(true);
    await expect(serverKey(master, 'Bad Purpose')).rejects.toThrow(RangeError);

    const token = { kid: before.current.id, mac: createHmac('sha256', before.current.key).update('run 42').digest('hex') };
    const verify = async () => {
      const key = findServerKey(await serverKey(master, 'run-token'), token.kid);
      return key !== undefined && createHmac('sha256', key.key).update('run 42').digest('hex') === token.mac;
    };
    source.ring = rotateKeyRing(source.ring, { now, acceptPreviousMs: 2 * DAY });
    const after = await serverKey(master, 'run-token');
    expect(after.current.id).not.toBe(before.current.id);
    expect(after.previous.map((k) => [k.id, k.until])).toEqual([[before.current.id, 2 * DAY]]);
    expect(await verify()).toBe(true);
    now = 2 * DAY + 1;
    expect(await verify()).toBe(false);
  });
});

describe('redactSecrets', () => {
  const secret = 'sk_live+51H/ab?c=d&e';

  it('removes the raw, JSON-escaped, URL-encoded, hex and base64 forms, in nested values', () => {
    const b64 = Buffer.from(secret).toString('base64');
    const forms = [
      secret,
      JSON.stringify(secret).slice(1, -1),
      encodeURIComponent(secret),
      encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
      new URLSearchParams({ v: secret }).toString().slice(2),
      Buffer.from(secret).toString('hex'),
      b64,
      Buffer.from(secret).toString('base64url'),
      // Basic credentials: the secret inside a longer base64 text, at each alignment
      Buffer.from(`user:${secret}`).toString('base64'),
      Buffer.from(`us:${secret}`).toString('base64'),
      Buffer.from(`u:${secret}`).toString('base64'),
    ];
    const out = redactSecrets({ list: forms.map((f) => `<${f}>`), [secret]: 'key' }, [secret]);
    const text = JSON.stringify(out);
    for (const f of forms) expect(text).not.toContain(f);
    expect(text).toContain(REDACTED);
    // decoding what is left of a Basic header finds no secret either
    for (const item of out.list) expect(Buffer.from(item.replace(/[<>]|\[redacted\]/g, ''), 'base64').toString('latin1')).not.toContain('51H/ab');
  });

  it('leaves text without secrets as it is, and ignores empty values', () => {
    expect(redactSecrets('nothing here', [''])).toBe('nothing here');
    expect(redactSecrets({ n: 1, t: true, s: null }, ['x'])).toEqual({ n: 1, t: true, s: null });
  });
});
