/**
 * Tokens a server key signs (lib/secrets/server-keys.ts): `<prefix>.<subject>.<key id>.<mac>`,
 * the MAC an HMAC-SHA256 of purpose, tenant and subject. Nothing is stored: a token is computed
 * again whenever it is needed (a replayed response gets the same one) and checked by computing
 * it again. Rotating the master key rotates the key; tokens of the previous key verify until
 * that key's `until`.
 *
 * @example
 *   const tokens = signedTokens(secrets.serverKey, 'run-token', 'rt1');
 *   const token = await tokens.sign('acme', runId);        // rt1.<run id>.<kid>.<mac>
 *   (await tokens.verify('acme', token)) === runId;        // else null
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { findServerKey, type ServerKeySet } from './server-keys';

export interface SignedTokens {
  sign(tenant: string, subject: string): Promise<string>;
  /** The subject the token was made for, or null when it is not one of ours (or its key expired). */
  verify(tenant: string, token: string): Promise<string | null>;
  /** The subject a string of this token's shape names, without checking it (routing only). */
  subjectOf(token: string): string | null;
}

/** Subjects are base64url characters; 128 at most unless a purpose allows more. */
const subjectPattern = (max: number) => new RegExp(`^[A-Za-z0-9_-]{1,${max}}$`);
/** How long a derived key set is reused before the master ring is asked again. */
const KEY_CACHE_MS = 60_000;

export function signedTokens(
  serverKey: (purpose: string) => Promise<ServerKeySet>,
  purpose: string,
  prefix: string,
  now: () => number = Date.now,
  options: { maxSubjectLength?: number } = {},
): SignedTokens {
  const maxSubject = options.maxSubjectLength ?? 128;
  const SUBJECT = subjectPattern(maxSubject);
  let cached: { keys: ServerKeySet; until: number } | undefined;
  const keySet = async () => {
    if (!cached || cached.until <= now()) cached = { keys: await serverKey(purpose), until: now() + KEY_CACHE_MS };
    return cached.keys;
  };
  const mac = (key: Buffer, tenant: string, subject: string) => createHmac('sha256', key).update(`${purpose}\n${tenant}\n${subject}`).digest('base64url');
  const parse = (token: string) => {
    const parts = token.split('.');
    if (parts.length !== 4 || parts[0] !== prefix) return null;
    const [, subject, keyId, signature] = parts as [string, string, string, string];
    return SUBJECT.test(subject) && /^[A-Za-z0-9_-]{1,64}$/.test(keyId) ? { subject, keyId, signature } : null;
  };
  return {
    async sign(tenant, subject) {
      if (!SUBJECT.test(subject)) throw new RangeError(`a token subject is 1-${maxSubject} characters of [A-Za-z0-9_-]`);
      const { current } = await keySet();
      return `${prefix}.${subject}.${current.id}.${mac(current.key, tenant, subject)}`;
    },
    async verify(tenant, token) {
      const parsed = parse(token);
      if (!parsed) return null;
      const key = findServerKey(await keySet(), parsed.keyId);
      if (!key || (key.until !== undefined && key.until <= now())) return null;
      const expected = Buffer.from(mac(key.key, tenant, parsed.subject));
      const given = Buffer.from(parsed.signature);
      return given.length === expected.length && timingSafeEqual(given, expected) ? parsed.subject : null;
    },
    subjectOf(token) {
      return parse(token)?.subject ?? null;
    },
  };
}
