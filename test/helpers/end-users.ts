/**
 * End-user tokens as an embedding site makes them: an HS256 JWT (RFC 7519) signed with the
 * tenant's embed secret (made through the admin route), `kid` naming the secret. Built here by
 * hand, independently of the library the server verifies with.
 */
import { createHmac } from 'node:crypto';

export interface EmbedSecret {
  id: string;
  secret: string;
}

/** Makes an embed secret through the admin route of a served app. */
export async function makeEmbedSecret(call: (method: string, path: string, options?: { key?: string | null }) => Promise<{ status: number; json: any }>, adminKey: string): Promise<EmbedSecret> {
  const made = await call('POST', '/workflows/v1/embed-secrets', { key: adminKey });
  if (made.status !== 201) throw new Error(`embed secret not made: ${made.status} ${JSON.stringify(made.json)}`);
  return { id: made.json.id, secret: made.json.secret };
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export function endUserToken(
  embed: EmbedSecret,
  claims: { sub?: unknown; workflows?: unknown; exp?: unknown; nbf?: unknown; [claim: string]: unknown },
  options: { kid?: string | null; alg?: 'HS256' | 'HS512' | 'none'; nowSec?: number; secret?: string } = {},
): string {
  const nowSec = options.nowSec ?? Math.floor(Date.now() / 1000);
  const alg = options.alg ?? 'HS256';
  const header = b64({ alg, typ: 'JWT', ...(options.kid === null ? {} : { kid: options.kid ?? embed.id }) });
  const body = b64({ exp: nowSec + 3600, ...claims });
  if (alg === 'none') return `${header}.${body}.`;
  const mac = createHmac(alg === 'HS512' ? 'sha512' : 'sha256', options.secret ?? embed.secret).update(`${header}.${body}`).digest('base64url');
  return `${header}.${body}.${mac}`;
}
