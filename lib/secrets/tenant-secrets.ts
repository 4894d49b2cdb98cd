/**
 * A tenant's secrets: each value sealed with AES-256-GCM under the tenant's current data key;
 * each data key wrapped by the master key (master-key.ts). The store holds ciphertext only.
 *
 * Rotation:
 * - master key: rotate the ring (the old key stays accepted until its `until`); data keys
 *   wrapped by the old key are re-wrapped when next read, and `rewrapAll()` re-wraps every
 *   tenant's at once (listed in gsi1, no scan). No value is re-encrypted: only the small wrapped keys change.
 * - a tenant's data key: `rotateDataKey(tenant)` adds a new version, retires the old one (no
 *   write uses it from then on), re-encrypts every value under the new one and deletes the
 *   old. Every write (`put`) always seals with the current version.
 *
 * Unwrapped data keys are cached in memory per process for `dataKeyCacheMs`.
 *
 * @example
 *   const secrets = new TenantSecrets({ store, master: new MasterKeys(new LocalKeyFile('.easel/master-key.json')) });
 *   await secrets.put('acme', 'CRM_TOKEN', 'tok_…');
 *   await secrets.get('acme', 'CRM_TOKEN'); // 'tok_…'
 */
import type { StoreContext } from '../store/dynamo';
import {
  DataKeyRetiredError,
  deleteDataKey,
  deleteSecret,
  getDataKey,
  getSecret,
  listDataKeys,
  listSecrets,
  putDataKey,
  putSecret,
  retireDataKey,
  rewrapDataKey,
  listAllDataKeys,
  type StoredDataKey,
} from '../store/secrets';
import { keyIdOf, newKey, open, SealError, seal } from './crypto';
import { type MasterKeys, MasterKeyError } from './master-key';

/** `{secret.NAME}`: a letter or underscore, then up to 63 letters, digits or underscores. */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** Largest value, in UTF-8 bytes. */
export const MAX_SECRET_BYTES = 8192;

/**
 * Values Easel keeps for a tenant itself (embed secrets): sealed like secrets, but no secret
 * name can spell them, so the secrets API never lists or replaces them and no `{secret.NAME}`
 * resolves them.
 */
export const RESERVED_NAME = /^~[a-z]+\.[A-Za-z0-9_-]{1,64}$/;
/** @default how long an unwrapped data key is kept in memory: 5 minutes */
export const DEFAULT_DATA_KEY_CACHE_MS = 300_000;

export interface SecretInfo {
  name: string;
  createdAt: string;
  updatedAt: string;
}

export interface RewrapResult {
  /** Data keys now wrapped by the current master key that were not. */
  rewrapped: number;
  /** Data keys no key of the ring opens. */
  unreadable: number;
}

export interface TenantSecretsOptions {
  store: StoreContext;
  master: MasterKeys;
  /** Epoch ms. @default Date.now */
  now?: () => number;
  /** @default 300000 */
  dataKeyCacheMs?: number;
}

const dataKeyAad = (tenant: string, version: number) => `easel/data-key/${tenant}/${version}`;
const valueAad = (tenant: string, name: string, version: number) => `easel/secret/${tenant}/${name}/${version}`;
const dataKeyId = (version: number) => `dk${version}`;

export class TenantSecrets {
  private readonly cache = new Map<string, { key: Buffer; until: number }>();
  private readonly now: () => number;

  constructor(private readonly options: TenantSecretsOptions) {
    this.now = options.now ?? Date.now;
  }

  get master(): MasterKeys {
    return this.options.master;
  }

  /** Stores (or replaces) a value, sealed by the tenant's current data key. */
  async put(tenant: string, name: string, value: string): Promise<SecretInfo & { created: boolean }> {
    checkName(name);
    return this.seal(tenant, name, value);
  }

  /** A reserved value (RESERVED_NAME): stored like a secret, outside the secrets' namespace. */
  async putReserved(tenant: string, name: string, value: string): Promise<SecretInfo & { created: boolean }> {
    if (!RESERVED_NAME.test(name)) throw new RangeError(`a reserved name matches ${RESERVED_NAME}`);
    return this.seal(tenant, name, value);
  }

  async getReserved(tenant: string, name: string): Promise<string | undefined> {
    return RESERVED_NAME.test(name) ? this.read(tenant, name) : undefined;
  }

  /** Reserved values whose name starts with `prefix` (names and times). */
  async listReserved(tenant: string, prefix: string): Promise<SecretInfo[]> {
    const stored = await listSecrets(this.options.store, tenant);
    return stored.filter((s) => s.name.startsWith(prefix) && RESERVED_NAME.test(s.name)).map((s) => ({ name: s.name, createdAt: s.createdAt, updatedAt: s.updatedAt }));
  }

  async deleteReserved(tenant: string, name: string): Promise<boolean> {
    return RESERVED_NAME.test(name) ? deleteSecret(this.options.store, tenant, name) : false;
  }

  private async seal(tenant: string, name: string, value: string): Promise<SecretInfo & { created: boolean }> {
    if (Buffer.byteLength(value, 'utf8') > MAX_SECRET_BYTES) throw new RangeError(`a secret value is at most ${MAX_SECRET_BYTES} bytes`);
    for (let attempt = 0; ; attempt++) {
      const { version, key } = await this.currentDataKey(tenant);
      const at = new Date(this.now()).toISOString();
      try {
        const written = await putSecret(this.options.store, tenant, { name, ciphertext: seal(key, dataKeyId(version), value, valueAad(tenant, name, version)), dataKeyVersion: version, at });
        if (!written) continue;
        return { name, createdAt: written.createdAt, updatedAt: at, created: written.created };
      } catch (error) {
        // a rotation retired the key between reading and writing: seal with the new one
        if (!(error instanceof DataKeyRetiredError) || attempt >= 3) throw error;
      }
    }
  }

  /** The value, or undefined when the tenant has no secret by that name. */
  async get(tenant: string, name: string): Promise<string | undefined> {
    return SECRET_NAME.test(name) ? this.read(tenant, name) : undefined;
  }

  private async read(tenant: string, name: string): Promise<string | undefined> {
    for (let attempt = 0; ; attempt++) {
      const stored = await getSecret(this.options.store, tenant, name);
      if (!stored) return undefined;
      if (keyIdOf(stored.ciphertext) !== dataKeyId(stored.dataKeyVersion)) throw new MasterKeyError(`secret ${name} names a data key its ciphertext was not sealed with`);
      const key = await this.dataKey(tenant, stored.dataKeyVersion);
      // re-encrypted by a rotation between the two reads: read it again
      if (!key && attempt < 2) continue;
      if (!key) throw new MasterKeyError(`the data key of secret ${name} is missing`);
      return open(key, stored.ciphertext, valueAad(tenant, name, stored.dataKeyVersion)).toString('utf8');
    }
  }

  /** Names and times, never values. */
  async list(tenant: string): Promise<SecretInfo[]> {
    const stored = (await listSecrets(this.options.store, tenant)).filter((s) => SECRET_NAME.test(s.name));
    return stored.map((s) => ({ name: s.name, createdAt: s.createdAt, updatedAt: s.updatedAt }));
  }

  /** False when there was no secret by that name. */
  async delete(tenant: string, name: string): Promise<boolean> {
    if (!SECRET_NAME.test(name)) return false;
    return deleteSecret(this.options.store, tenant, name);
  }

  /**
   * A new data key version for the tenant: the old one is retired (writes move to the new one),
   * every value is re-encrypted under the new one, then the old one is deleted.
   */
  async rotateDataKey(tenant: string): Promise<{ version: number; reencrypted: number }> {
    const store = this.options.store;
    const existing = await listDataKeys(store, tenant);
    const version = (existing.at(-1)?.version ?? 0) + 1;
    const key = newKey();
    const at = new Date(this.now()).toISOString();
    if (!(await putDataKey(store, { tenant, version, wrapped: await this.master.wrap(key, dataKeyAad(tenant, version)), createdAt: at }))) {
      throw new Error(`data key version ${version} of this tenant was made by a concurrent rotation`);
    }
    this.remember(tenant, version, key);
    // from here no write seals with an older key (putSecret's condition), so the listing below
    // sees every value that still needs re-encrypting
    for (const old of existing) await retireDataKey(store, tenant, old.version, at);
    let reencrypted = 0;
    for (const stored of await listSecrets(store, tenant)) {
      if (stored.dataKeyVersion === version) continue;
      const oldKey = await this.dataKey(tenant, stored.dataKeyVersion);
      if (!oldKey) throw new MasterKeyError(`the data key of secret ${stored.name} is missing`);
      const value = open(oldKey, stored.ciphertext, valueAad(tenant, stored.name, stored.dataKeyVersion));
      const ciphertext = seal(key, dataKeyId(version), value, valueAad(tenant, stored.name, version));
      // null: a concurrent put replaced it, necessarily under the new key
      if (await putSecret(store, tenant, { name: stored.name, ciphertext, dataKeyVersion: version, at, expect: stored.ciphertext })) reencrypted++;
    }
    const stillUsed = new Set((await listSecrets(store, tenant)).map((s) => s.dataKeyVersion));
    for (const old of existing) {
      if (stillUsed.has(old.version)) continue;
      await deleteDataKey(store, tenant, old.version);
      this.cache.delete(cacheKey(tenant, old.version));
    }
    return { version, reencrypted };
  }

  /** Re-wraps, under the current master key, the tenant's data keys wrapped by a previous one. */
  async rewrapTenant(tenant: string): Promise<RewrapResult> {
    return this.rewrap(await listDataKeys(this.options.store, tenant));
  }

  /**
   * After a master key rotation: re-wraps every tenant's data keys under the current master
   * key, so the previous one can be dropped before its time. `unreadable` counts data keys no
   * key of the ring opens (their master key is gone): their values are lost.
   */
  async rewrapAll(): Promise<RewrapResult> {
    const found: StoredDataKey[] = [];
    for (const { tenant, version } of await listAllDataKeys(this.options.store)) {
      const stored = await getDataKey(this.options.store, tenant, version);
      if (stored) found.push(stored);
    }
    return this.rewrap(found);
  }

  private async rewrap(dataKeys: StoredDataKey[]): Promise<RewrapResult> {
    const { current } = await this.master.ring();
    const result = { rewrapped: 0, unreadable: 0 };
    for (const dk of dataKeys) {
      if (keyIdOf(dk.wrapped) === current.id) continue;
      let key: Buffer;
      try {
        ({ key } = await this.master.unwrap(dk.wrapped, dataKeyAad(dk.tenant, dk.version)));
      } catch (error) {
        if (!(error instanceof MasterKeyError || error instanceof SealError)) throw error;
        result.unreadable++;
        continue;
      }
      const wrapped = await this.master.wrap(key, dataKeyAad(dk.tenant, dk.version));
      if (await rewrapDataKey(this.options.store, dk.tenant, dk.version, dk.wrapped, wrapped)) result.rewrapped++;
    }
    return result;
  }

  /** The newest data key of the tenant, made on the first write. */
  private async currentDataKey(tenant: string): Promise<{ version: number; key: Buffer }> {
    const store = this.options.store;
    for (;;) {
      const all = await listDataKeys(store, tenant);
      const newest = all.filter((k) => !k.retiredAt).at(-1);
      if (newest) return { version: newest.version, key: await this.unwrapStored(newest) };
      // none yet, or all retired (a rotation that stopped midway): the next version
      const key = newKey();
      const version = (all.at(-1)?.version ?? 0) + 1;
      const made = await putDataKey(store, { tenant, version, wrapped: await this.master.wrap(key, dataKeyAad(tenant, version)), createdAt: new Date(this.now()).toISOString() });
      if (made) {
        this.remember(tenant, version, key);
        return { version, key };
      }
      // a concurrent first write made it: use theirs
    }
  }

  private async dataKey(tenant: string, version: number): Promise<Buffer | undefined> {
    const hit = this.cache.get(cacheKey(tenant, version));
    if (hit && hit.until > this.now()) return hit.key;
    const stored = await getDataKey(this.options.store, tenant, version);
    return stored ? this.unwrapStored(stored) : undefined;
  }

  private async unwrapStored(stored: StoredDataKey): Promise<Buffer> {
    const hit = this.cache.get(cacheKey(stored.tenant, stored.version));
    if (hit && hit.until > this.now() && keyIdOf(stored.wrapped) === (await this.master.ring()).current.id) return hit.key;
    const { key, stale } = await this.master.unwrap(stored.wrapped, dataKeyAad(stored.tenant, stored.version));
    // wrapped by a previous master key: wrap it again now (a lost race means another did)
    if (stale) await rewrapDataKey(this.options.store, stored.tenant, stored.version, stored.wrapped, await this.master.wrap(key, dataKeyAad(stored.tenant, stored.version)));
    this.remember(stored.tenant, stored.version, key);
    return key;
  }

  private remember(tenant: string, version: number, key: Buffer): void {
    if (this.cache.size >= 1000) this.cache.clear();
    this.cache.set(cacheKey(tenant, version), { key, until: this.now() + (this.options.dataKeyCacheMs ?? DEFAULT_DATA_KEY_CACHE_MS) });
  }
}

function cacheKey(tenant: string, version: number): string {
  return `${tenant}\u0000${version}`;
}

function checkName(name: string): void {
  if (!SECRET_NAME.test(name)) throw new RangeError('a secret name is a letter or underscore, then up to 63 letters, digits or underscores');
}
