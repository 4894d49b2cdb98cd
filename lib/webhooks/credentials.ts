/**
 * Webhook credentials: what authenticates a delivery never stays in a stored DSL.
 *
 * At import (`sealCredentials`), each literal credential of a Begin in webhook mode —
 * `security.token.token_value`, `security.basic_auth.password`, `security.jwt.secret` — is
 * moved into the tenant's secrets under a reserved name (`~webhook.whs_…`: never listed by the
 * secrets API, never resolved by `{secret.NAME}`), and the DSL keeps a reference beside it
 * (`token_ref`, `password_ref`, `secret_ref`). The copy RAGFlow's editor keeps in `graph` is
 * replaced the same way. Tokens and passwords are stored as a salted SHA-256 only and checked by
 * comparing hashes in constant time; a JWT secret is kept sealed, as verifying needs it. A DSL
 * sent back with a reference keeps it (the reference must name a credential of this tenant).
 *
 * @example
 *   const stored = await sealCredentials(secrets, 'acme', dsl);  // the DSL to store
 *   await new WebhookCredentials(secrets).matches('acme', ref, 'token', request.headers.get('x-token'));
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { DslValidationError, type DslProblem } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { CREDENTIAL_REF } from '../components/webhook-params';
import { EaselError } from '../errors';
import type { TenantSecrets } from '../secrets/tenant-secrets';

export type CredentialKind = 'token' | 'basic' | 'jwt';

type Stored = { v: 1; kind: 'token' | 'basic'; salt: string; hash: string } | { v: 1; kind: 'jwt'; secret: string };

const PREFIX = '~webhook.';

/** Where each credential sits in `security`, and the reference that replaces it. */
const PLACES: readonly { holder: string; literal: string; ref: string; kind: CredentialKind }[] = [
  { holder: 'token', literal: 'token_value', ref: 'token_ref', kind: 'token' },
  { holder: 'basic_auth', literal: 'password', ref: 'password_ref', kind: 'basic' },
  { holder: 'jwt', literal: 'secret', ref: 'secret_ref', kind: 'jwt' },
];

/** Begin components in webhook mode: their ids and params (of the raw DSL). */
export function webhookBegins(dsl: unknown): { id: string; params: Record<string, unknown> }[] {
  const components = isRecord(dsl) && isRecord(dsl.components) ? dsl.components : {};
  const out: { id: string; params: Record<string, unknown> }[] = [];
  for (const [id, entry] of Object.entries(components)) {
    const obj = isRecord(entry) && isRecord(entry.obj) ? entry.obj : undefined;
    const params = obj && isRecord(obj.params) ? obj.params : undefined;
    if (obj?.component_name === 'Begin' && params && typeof params.mode === 'string' && params.mode.trim().toLowerCase() === 'webhook') out.push({ id, params });
  }
  return out;
}

/**
 * The DSL to store: a copy with every literal webhook credential moved into the tenant's
 * secrets. Nothing is written when the DSL is refused (a reference to no stored credential, a
 * credential copied elsewhere in the DSL). Call it on a DSL that compiled.
 */
export async function sealCredentials(secrets: TenantSecrets | undefined, tenant: string, dsl: Record<string, unknown>): Promise<Record<string, unknown>> {
  if (webhookBegins(dsl).length === 0) return dsl;
  const copy = structuredClone(dsl);
  const problems: DslProblem[] = [];
  const writes = new Map<string, { ref: string; stored: Stored }>();
  const refFor = (value: string, kind: CredentialKind): string => {
    const known = writes.get(`${kind}\u0000${value}`);
    if (known) return known.ref;
    const ref = `whs_${randomBytes(12).toString('hex')}`;
    writes.set(`${kind}\u0000${value}`, { ref, stored: kind === 'jwt' ? { v: 1, kind, secret: value } : hashed(kind, value) });
    return ref;
  };
  const references: { componentId: string; field: string; ref: string; kind: CredentialKind }[] = [];
  const replaceIn = (componentId: string, security: unknown, at: string) => {
    if (!isRecord(security)) return;
    for (const place of PLACES) {
      const holder = security[place.holder];
      if (!isRecord(holder)) continue;
      const literal = holder[place.literal];
      if (typeof literal === 'string' && literal !== '') {
        holder[place.ref] = refFor(literal, place.kind);
        delete holder[place.literal];
      } else if (typeof holder[place.ref] === 'string') {
        references.push({ componentId, field: `${at}.security.${place.holder}.${place.ref}`, ref: holder[place.ref] as string, kind: place.kind });
      }
    }
  };
  for (const { id, params } of webhookBegins(copy)) {
    replaceIn(id, params.security, 'obj.params');
    // RAGFlow's editor keeps the form a second time, in the graph node of the same id
    const nodes = isRecord(copy.graph) && Array.isArray(copy.graph.nodes) ? copy.graph.nodes : [];
    for (const node of nodes) {
      if (isRecord(node) && node.id === id && isRecord(node.data) && isRecord(node.data.form)) replaceIn(id, node.data.form.security, 'graph.data.form');
    }
  }
  const values = [...writes.keys()].map((k) => k.slice(k.indexOf('\u0000') + 1));
  for (const { path } of leftovers(copy, values)) problems.push({ field: path, message: 'holds a webhook credential: it may appear only in security (where it is moved to the tenant\u2019s secrets)' });
  for (const r of references) {
    if (!CREDENTIAL_REF.test(r.ref)) continue; // the compiler names a malformed one
    const stored = secrets ? await readStored(secrets, tenant, r.ref) : undefined;
    if (!stored || stored.kind !== r.kind) problems.push({ component_id: r.componentId, field: r.field, message: `names no ${r.kind} credential of this tenant: send the credential itself instead` });
  }
  if (problems.length > 0) throw new DslValidationError(problems);
  if (writes.size === 0) return copy;
  if (!secrets) throw new EaselError('unavailable', 'tenant secrets are not configured on this server: a webhook credential cannot be stored');
  for (const { ref, stored } of writes.values()) await secrets.putReserved(tenant, PREFIX + ref, JSON.stringify(stored));
  return copy;
}

/** Checks delivered credentials against the stored ones; stored credentials never change, so they are kept in memory. */
export class WebhookCredentials {
  private readonly cache = new Map<string, Stored>();

  constructor(private readonly secrets: TenantSecrets) {}

  /** Whether `provided` is the token (or the password) `ref` names; constant time in the compare. */
  async matches(tenant: string, ref: string, kind: 'token' | 'basic', provided: string | undefined): Promise<boolean> {
    const stored = await this.stored(tenant, ref);
    if (!stored || stored.kind !== kind || provided === undefined) return false;
    const expected = Buffer.from(stored.hash, 'hex');
    const actual = Buffer.from(digest(stored.salt, provided), 'hex');
    return expected.length === actual.length && timingSafeEqual(expected, actual);
  }

  /** The JWT secret `ref` names. */
  async jwtSecret(tenant: string, ref: string): Promise<string | undefined> {
    const stored = await this.stored(tenant, ref);
    return stored?.kind === 'jwt' ? stored.secret : undefined;
  }

  private async stored(tenant: string, ref: string): Promise<Stored | undefined> {
    const key = `${tenant}\u0000${ref}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const stored = await readStored(this.secrets, tenant, ref);
    if (stored) {
      if (this.cache.size >= 1000) this.cache.clear();
      this.cache.set(key, stored);
    }
    return stored;
  }
}

async function readStored(secrets: TenantSecrets, tenant: string, ref: string): Promise<Stored | undefined> {
  const raw = await secrets.getReserved(tenant, PREFIX + ref);
  if (raw === undefined) return undefined;
  try {
    const parsed = JSON.parse(raw) as Stored;
    return parsed.v === 1 ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function hashed(kind: 'token' | 'basic', value: string): Stored {
  const salt = randomBytes(16).toString('hex');
  return { v: 1, kind, salt, hash: digest(salt, value) };
}

function digest(salt: string, value: string): string {
  return createHash('sha256').update(salt, 'hex').update(value, 'utf8').digest('hex');
}

/** Strings of the DSL that still hold a credential (equal to it, or containing one of 8+ characters). */
function leftovers(value: unknown, secrets: readonly string[], path = ''): { path: string }[] {
  if (secrets.length === 0) return [];
  if (typeof value === 'string') {
    return secrets.some((s) => value === s || (s.length >= 8 && value.includes(s))) ? [{ path: path || 'dsl' }] : [];
  }
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => leftovers(v, secrets, path ? `${path}.${k}` : k));
}
