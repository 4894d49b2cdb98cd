/**
 * Embed secrets: what a tenant's own site signs end-user tokens with (HS256 JWTs), so a public
 * execute key can act for one of the site's users and only for them. Made by an admin route and
 * shown once; kept sealed like tenant secrets (a reserved name: not listed, never resolved by
 * `{secret.NAME}`). A tenant may hold a few at once, so one is rotated by making the next,
 * moving the site to it and deleting the old one; a token names its secret in the `kid` header.
 *
 * An end-user token's claims: `sub` (the user id, 1-256 characters), `exp` (required, epoch
 * seconds), `workflows` (the workflow ids it opens, at least one), optional `nbf`.
 *
 * @example
 *   const { id, secret } = await embed.create('acme');               // shown once
 *   // the site: jwt.sign({ sub: 'u-42', workflows: ['wf_…'], exp }, secret, { keyid: id })
 *   const user = await embed.verify('acme', token);                  // { id: 'u-42', workflowIds: [...] } or null
 */
import { randomBytes } from 'node:crypto';
import { decode, verify } from 'hono/jwt';
import type { TenantSecrets } from './tenant-secrets';

export interface EmbedSecretInfo {
  id: string;
  createdAt: string;
}

export interface VerifiedEndUser {
  id: string;
  workflowIds: string[];
  /** Epoch seconds. */
  expiresAt: number;
}

/** Why a token was refused, for the client's error message (never which secret exists). */
export class EndUserTokenError extends Error {}

export const MAX_EMBED_SECRETS = 3;
export const DEFAULT_EMBED_CACHE_MS = 30_000;
const PREFIX = '~embed.';
const USER_ID = /^[\x21-\x7e]{1,256}$/;

export class EmbedSecrets {
  private readonly cache = new Map<string, { secrets: { id: string; secret: string }[]; until: number }>();
  private readonly now: () => number;
  private readonly cacheMs: number;

  constructor(private readonly tenantSecrets: TenantSecrets, options: { now?: () => number; cacheMs?: number } = {}) {
    this.now = options.now ?? Date.now;
    this.cacheMs = options.cacheMs ?? DEFAULT_EMBED_CACHE_MS;
  }

  /** A new secret: its value is returned this once and never again. */
  async create(tenant: string): Promise<EmbedSecretInfo & { secret: string }> {
    const existing = await this.list(tenant);
    if (existing.length >= MAX_EMBED_SECRETS) throw new RangeError(`a tenant holds at most ${MAX_EMBED_SECRETS} embed secrets: delete one first`);
    const id = `emb_${randomBytes(8).toString('hex')}`;
    const secret = `es_${randomBytes(32).toString('base64url')}`;
    const info = await this.tenantSecrets.putReserved(tenant, PREFIX + id, secret);
    this.cache.delete(tenant);
    return { id, secret, createdAt: info.createdAt };
  }

  async list(tenant: string): Promise<EmbedSecretInfo[]> {
    return (await this.tenantSecrets.listReserved(tenant, PREFIX)).map((s) => ({ id: s.name.slice(PREFIX.length), createdAt: s.createdAt }));
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    this.cache.delete(tenant);
    return this.tenantSecrets.deleteReserved(tenant, PREFIX + id);
  }

  /** The user a token asserts, or EndUserTokenError saying what is wrong with it. */
  async verify(tenant: string, token: string): Promise<VerifiedEndUser> {
    let header: { alg?: unknown; kid?: unknown };
    try {
      header = decode(token).header;
    } catch {
      throw new EndUserTokenError('the end-user token is not a JWT');
    }
    if (header.alg !== 'HS256') throw new EndUserTokenError('the end-user token must be signed with HS256');
    const secrets = await this.secretsOf(tenant);
    const candidates = typeof header.kid === 'string' ? secrets.filter((s) => s.id === header.kid) : secrets;
    let payload: Record<string, unknown> | undefined;
    for (const { secret } of candidates) {
      try {
        // times are checked below, on the injected clock
        payload = (await verify(token, secret, { alg: 'HS256', exp: false, nbf: false, iat: false })) as Record<string, unknown>;
        break;
      } catch {
        // not this secret
      }
    }
    if (!payload) throw new EndUserTokenError('the end-user token is not signed by an embed secret of this tenant');
    const nowSec = Math.floor(this.now() / 1000);
    if (typeof payload.exp !== 'number' || !Number.isFinite(payload.exp)) throw new EndUserTokenError('the end-user token needs an `exp` claim');
    if (payload.exp <= nowSec) throw new EndUserTokenError('the end-user token has expired');
    if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > nowSec)) throw new EndUserTokenError('the end-user token is not valid yet (`nbf`)');
    if (typeof payload.sub !== 'string' || !USER_ID.test(payload.sub)) throw new EndUserTokenError('the end-user token needs a `sub` claim: the user id, 1-256 printable characters');
    const workflows = payload.workflows;
    if (!Array.isArray(workflows) || workflows.length === 0 || workflows.length > 100 || !workflows.every((w) => typeof w === 'string')) {
      throw new EndUserTokenError('the end-user token needs a `workflows` claim: the workflow ids it opens (1-100)');
    }
    return { id: payload.sub, workflowIds: workflows as string[], expiresAt: payload.exp };
  }

  private async secretsOf(tenant: string): Promise<{ id: string; secret: string }[]> {
    const hit = this.cache.get(tenant);
    if (hit && hit.until > this.now()) return hit.secrets;
    const infos = await this.list(tenant);
    const secrets: { id: string; secret: string }[] = [];
    for (const { id } of infos) {
      const secret = await this.tenantSecrets.getReserved(tenant, PREFIX + id);
      if (secret) secrets.push({ id, secret });
    }
    if (this.cache.size > 1000) this.cache.clear();
    this.cache.set(tenant, { secrets, until: this.now() + this.cacheMs });
    return secrets;
  }
}
