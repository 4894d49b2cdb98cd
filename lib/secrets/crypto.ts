/**
 * AES-256-GCM sealing with the key id written into the sealed text, so that whoever opens it
 * knows which key it needs (and rotation can tell old ciphertexts from new ones):
 *
 *   easel1.<key id>.<base64url(12-byte IV | ciphertext | 16-byte tag)>
 *
 * The associated data binds a sealed value to where it belongs (tenant, name, key version):
 * a ciphertext copied into another tenant's item, or under another name, does not open.
 *
 * @example
 *   const sealed = seal(key, 'dk3', 'hello', 'tenant-a/secret/API_KEY');
 *   keyIdOf(sealed); // 'dk3'
 *   open(key, sealed, 'tenant-a/secret/API_KEY'); // 'hello' (as a Buffer)
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const PREFIX = 'easel1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_BYTES = 32;

/** The sealed text does not open: wrong key, altered bytes, or another item's ciphertext. */
export class SealError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SealError';
  }
}

export function seal(key: Uint8Array, keyId: string, plaintext: string | Uint8Array, aad: string): string {
  checkKey(key);
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(keyId)) throw new Error(`a key id is 1-64 characters of [A-Za-z0-9_-], got "${keyId}"`);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext), cipher.final()]);
  return `${PREFIX}.${keyId}.${Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')}`;
}

export function open(key: Uint8Array, sealed: string, aad: string): Buffer {
  checkKey(key);
  const { bytes } = parse(sealed);
  if (bytes.length < IV_BYTES + TAG_BYTES) throw new SealError('the sealed value is truncated');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new SealError('the sealed value does not open with this key (altered, or sealed for another item)');
  }
}

/** The id of the key a sealed text needs. */
export function keyIdOf(sealed: string): string {
  return parse(sealed).keyId;
}

/** A key's id derived from its bytes (a hash, which reveals nothing of a random key). */
export function keyIdFor(key: Uint8Array): string {
  return `mk_${createHash('sha256').update('easel master key id\0').update(key).digest('hex').slice(0, 12)}`;
}

export function newKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

function parse(sealed: string): { keyId: string; bytes: Buffer } {
  const parts = sealed.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX || !parts[1] || !parts[2]) throw new SealError('not a sealed value');
  return { keyId: parts[1], bytes: Buffer.from(parts[2], 'base64url') };
}

function checkKey(key: Uint8Array): void {
  if (key.length !== KEY_BYTES) throw new Error(`an AES-256 key is ${KEY_BYTES} bytes, got ${key.length}`);
}
