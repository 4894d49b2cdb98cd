/**
 * One HTTP delivery to a workflow in webhook mode, checked as Begin's settings say
 * (components/webhook-params.ts), in this order: the method; the sender's address
 * (`ip_whitelist`); its credentials (`security`); the body's size and content type; the query,
 * headers and body against `schema` (json-schema.ts); the rate limit. What passes becomes the
 * run's `webhook_payload`: `{query, headers, body}`, Begin's outputs.
 *
 * Every refusal is an EaselError with the code the HTTP layer answers (401, 403, 400 naming
 * the field, 413, 429). Nothing here knows HTTP routing; the route is lib/http/routes/webhooks.ts.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import { decode, verify } from 'hono/jwt';
import type { Workflow } from '../canvas';
import { isRecord } from '../canvas/references';
import { MAX_WEBHOOK_BODY_BYTES, RATE_WINDOWS, type WebhookConfig } from '../components/webhook-params';
import { EaselError } from '../errors';
import { cidrContains, parseCidr, parseIp } from '../outbound/ip';
import type { StoreContext } from '../store/dynamo';
import { takeRunStart } from '../store/quotas';
import { RateLimitedError } from '../turns/quotas';
import type { WebhookCredentials } from './credentials';
import { extractSection, type SchemaProblem } from './json-schema';

/** A refusal about one part of the delivery: `field` names it, `fields` lists every problem. */
export class DeliveryRefused extends EaselError {
  constructor(
    code: 'invalid_request' | 'unauthorized' | 'forbidden' | 'payload_too_large',
    message: string,
    readonly field?: string,
    readonly fields?: readonly SchemaProblem[],
  ) {
    super(code, message);
  }
}

/** The headers a sender's delivery id is read from, in order; the first present counts. */
export const DELIVERY_ID_HEADERS = ['idempotency-key', 'x-delivery-id', 'x-github-delivery', 'x-gitlab-event-uuid', 'webhook-id', 'x-shopify-webhook-id', 'x-request-id'] as const;

export interface Delivery {
  method: string;
  headers: Headers;
  query: URLSearchParams;
  /** The sender's address as the hosting saw it (never a header a client writes). */
  clientAddress: string | undefined;
}

/** Begin's id and webhook settings, or not_found when the workflow is not in webhook mode. */
export function webhookEntry(workflow: Workflow): { beginId: string; config: WebhookConfig } {
  const begin = workflow.node(workflow.entryId);
  const params = begin.params as { mode?: string; webhook?: WebhookConfig };
  if (!params.webhook) throw new EaselError('not_found', `this workflow is not in webhook mode (its Begin's mode is "${params.mode ?? 'conversational'}")`);
  return { beginId: begin.id, config: params.webhook };
}

export function checkMethod(config: WebhookConfig, method: string): void {
  const m = method.toUpperCase();
  if (config.methods.length > 0 && !config.methods.includes(m as WebhookConfig['methods'][number])) {
    throw new DeliveryRefused('invalid_request', `HTTP method '${m}' not allowed for this webhook.`, 'method');
  }
}

export function checkAddress(config: WebhookConfig, address: string | undefined): void {
  const rules = config.security?.ip_whitelist ?? [];
  if (rules.length === 0) return;
  const ip = address ? parseIp(address) : null;
  const allowed = ip !== null && rules.some((rule) => {
    const network = parseCidr(rule.trim());
    return network !== null && cidrContains(network, ip);
  });
  if (!allowed) throw new DeliveryRefused('forbidden', `IP ${address ?? '(unknown)'} is not allowed by whitelist`);
}

export interface AuthContext {
  tenant: string;
  credentials: WebhookCredentials | undefined;
  /** Epoch ms, for a JWT's exp and nbf. */
  now: number;
  /** The delivery came to RAGFlow's path, which anyone who knows the agent id can name. */
  byWorkflowId: boolean;
}

/** RAGFlow's rules: security is required; anonymous only with `allow_anonymous`; else token, basic or JWT. */
export async function authenticate(config: WebhookConfig, delivery: Delivery, ctx: AuthContext): Promise<void> {
  const security = config.security;
  if (!security) throw new DeliveryRefused('unauthorized', 'Webhook security is required. Set allow_anonymous to true to permit unauthenticated webhooks.');
  if (security.auth_type === 'none') {
    if (!security.allow_anonymous) throw new DeliveryRefused('unauthorized', 'Anonymous webhook access requires allow_anonymous to be true');
    // an agent id is no secret: an anonymous webhook answers only at its opaque URL
    if (ctx.byWorkflowId) throw new DeliveryRefused('unauthorized', 'an anonymous webhook answers only at its own URL (webhook_url), not at /api/v1/agents/{id}/webhook');
    return;
  }
  const credentials = ctx.credentials;
  if (!credentials) throw new EaselError('unavailable', 'tenant secrets are not configured on this server: webhook credentials cannot be checked');
  if (security.auth_type === 'token' && security.token) {
    const provided = delivery.headers.get(security.token.token_header) ?? undefined;
    const ref = security.token.token_ref;
    if (!ref || !(await credentials.matches(ctx.tenant, ref, 'token', provided))) throw new DeliveryRefused('unauthorized', 'Invalid token authentication', security.token.token_header);
    return;
  }
  if (security.auth_type === 'basic' && security.basic_auth) {
    const [user, password] = basicCredentials(delivery.headers.get('authorization'));
    const ref = security.basic_auth.password_ref;
    const userOk = user !== undefined && sameText(user, security.basic_auth.username);
    const passwordOk = ref !== undefined && (await credentials.matches(ctx.tenant, ref, 'basic', password));
    if (!userOk || !passwordOk) throw new DeliveryRefused('unauthorized', 'Invalid Basic Auth credentials', 'Authorization');
    return;
  }
  if (security.auth_type === 'jwt' && security.jwt) {
    await checkJwt(security.jwt, delivery.headers.get('authorization'), ctx, credentials);
    return;
  }
  throw new DeliveryRefused('unauthorized', `Unsupported auth_type: ${security.auth_type}`);
}

async function checkJwt(jwt: NonNullable<NonNullable<WebhookConfig['security']>['jwt']>, header: string | null, ctx: AuthContext, credentials: WebhookCredentials): Promise<void> {
  const refuse = (message: string): never => {
    throw new DeliveryRefused('unauthorized', message, 'Authorization');
  };
  if (!header?.startsWith('Bearer ')) refuse('Missing Bearer token');
  const token = (header as string).slice('Bearer '.length).trim();
  if (!token) refuse('Empty Bearer token');
  const secret = jwt.secret_ref ? await credentials.jwtSecret(ctx.tenant, jwt.secret_ref) : undefined;
  if (!secret) refuse('JWT secret not configured');
  let payload: Record<string, unknown>;
  try {
    if (decode(token).header.alg !== jwt.algorithm) throw new Error(`the token must be signed with ${jwt.algorithm}`);
    // times are checked below, on the injected clock
    payload = (await verify(token, secret as string, { alg: jwt.algorithm, exp: false, nbf: false, iat: false })) as Record<string, unknown>;
  } catch (error) {
    return refuse(`Invalid JWT: ${error instanceof Error ? error.message : 'malformed'}`);
  }
  const nowSec = Math.floor(ctx.now / 1000);
  if (payload.exp !== undefined && (typeof payload.exp !== 'number' || payload.exp <= nowSec)) refuse('Invalid JWT: Signature has expired');
  if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > nowSec)) refuse('Invalid JWT: The token is not yet valid (nbf)');
  if (jwt.audience !== undefined && ![payload.aud].flat().includes(jwt.audience)) refuse('Invalid JWT: Audience doesn\u2019t match');
  if (jwt.issuer !== undefined && payload.iss !== jwt.issuer) refuse('Invalid issuer');
  for (const claim of jwt.required_claims) if (!Object.hasOwn(payload, claim)) refuse(`Missing JWT claim: ${claim}`);
}

function basicCredentials(header: string | null): [string | undefined, string | undefined] {
  const m = header ? /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header) : null;
  if (!m) return [undefined, undefined];
  const text = Buffer.from(m[1] as string, 'base64').toString('utf8');
  const colon = text.indexOf(':');
  return colon < 0 ? [undefined, undefined] : [text.slice(0, colon), text.slice(colon + 1)];
}

function sameText(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** The largest body this webhook accepts: its `max_body_size` (RAGFlow: 10MB when unset), within the server's limit. */
export function bodyLimitOf(config: WebhookConfig, serverMax: number): number {
  return Math.min(serverMax, config.security?.max_body_size ?? MAX_WEBHOOK_BODY_BYTES);
}

/**
 * The run's `webhook_payload` from the delivery and its raw body: parsed by its content type,
 * then each section checked against `schema` (400 naming every field that fails).
 */
export async function parsePayload(config: WebhookConfig, delivery: Delivery, raw: Uint8Array, maxDepth = 64): Promise<{ query: unknown; headers: unknown; body: unknown }> {
  const type = (delivery.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (type && config.content_types.length > 0 && !config.content_types.includes(type as WebhookConfig['content_types'][number])) {
    throw new DeliveryRefused('invalid_request', `Invalid Content-Type: expect '${config.content_types.join("' or '")}', got '${type}'`, 'Content-Type');
  }
  const query: Record<string, string> = {};
  for (const [k, v] of delivery.query) if (!Object.hasOwn(query, k)) query[k] = v;
  const headers: Record<string, string> = {};
  delivery.headers.forEach((v, k) => {
    headers[k] = v;
  });
  const body = await parseBody(type, raw, delivery.headers.get('content-type') ?? '');
  if (depthOver(body, maxDepth)) throw new DeliveryRefused('invalid_request', `the body nests deeper than ${maxDepth} levels`, 'body');
  const problems: SchemaProblem[] = [];
  const section = (name: string, data: unknown, declaredOnly: boolean, caseInsensitive = false) => {
    const out = extractSection(name, data, config.schema[name as 'query' | 'headers' | 'body'], { declaredOnly, caseInsensitive });
    problems.push(...out.problems);
    return out.value;
  };
  const payload = {
    query: section('query', query, false),
    // headers carry credentials and infrastructure: only the declared ones reach the workflow
    headers: section('headers', headers, true, true),
    body: section('body', body, false),
  };
  const first = problems[0];
  if (first) throw new DeliveryRefused('invalid_request', `${first.field}: ${first.message}`, first.field, problems);
  return payload;
}

/** Whether a parsed value nests deeper than `max` (iteratively: a hostile body costs no stack). */
function depthOver(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (typeof v !== 'object' || v === null) continue;
    if (d > max) return true;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return false;
}

async function parseBody(type: string, raw: Uint8Array, contentType: string): Promise<unknown> {
  if (raw.length === 0) return {};
  const text = () => Buffer.from(raw).toString('utf8');
  if (type === 'application/json' || type.endsWith('+json')) {
    try {
      return JSON.parse(text()) as unknown;
    } catch {
      throw new DeliveryRefused('invalid_request', 'the body is not valid JSON', 'body');
    }
  }
  if (type === 'application/x-www-form-urlencoded' || type === 'multipart/form-data') {
    let form: FormData;
    try {
      form = await new Response(Buffer.from(raw), { headers: { 'content-type': contentType } }).formData();
    } catch {
      throw new DeliveryRefused('invalid_request', `the body is not valid ${type}`, 'body');
    }
    const out: Record<string, string> = {};
    for (const [k, v] of form) {
      if (typeof v !== 'string') throw new DeliveryRefused('invalid_request', `body.${k}: file parts are not supported in webhook deliveries`, `body.${k}`);
      if (!Object.hasOwn(out, k)) out[k] = v;
    }
    return out;
  }
  // text/plain, octet-stream, none or another: JSON if it is, else nothing (RAGFlow's rule)
  try {
    const parsed = JSON.parse(text()) as unknown;
    return isRecord(parsed) || Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/**
 * The delivery's idempotency key: `Idempotency-Key` (400 when malformed, as on the execute
 * route), else the first sender delivery id of DELIVERY_ID_HEADERS that is 1-255 printable
 * characters (another is not one: it is passed over), named with its header; none without one
 * (every delivery then runs).
 */
export function deliveryKey(headers: Headers): string | undefined {
  for (const name of DELIVERY_ID_HEADERS) {
    const value = headers.get(name)?.trim();
    if (value === undefined || value === '') continue;
    if (name === 'idempotency-key' && !/^[A-Za-z0-9_.:-]{1,255}$/.test(value)) {
      throw new DeliveryRefused('invalid_request', 'Idempotency-Key: 1-255 characters of A-Z a-z 0-9 _ . : -', 'Idempotency-Key');
    }
    if (/^[\x21-\x7e]{1,255}$/.test(value)) return `${name}:${value}`;
  }
  return undefined;
}

/**
 * Takes one delivery of the webhook's `rate_limit` (a fixed window of its `per`): a
 * conditional increment, exact under concurrency; RateLimitedError past it.
 */
export async function takeDelivery(store: StoreContext, tenant: string, hookId: string, config: WebhookConfig, now: number): Promise<void> {
  const rate = config.security?.rate_limit;
  if (!rate) return;
  const windowMs = RATE_WINDOWS[rate.per] * 1000;
  const window = Math.floor(now / windowMs);
  const ends = (window + 1) * windowMs;
  const taken = await takeRunStart(store, { tenant, scope: `hook:${hookId}:${rate.per}`, minute: window }, rate.limit, Math.ceil(ends / 1000) + 3600);
  if (!taken) {
    const retryAfter = Math.max(1, Math.ceil((ends - now) / 1000));
    throw new RateLimitedError('webhook_rate_limit', retryAfter, `Too many requests (rate limit exceeded): this webhook takes ${rate.limit} deliveries a ${rate.per}; retry in ${retryAfter} s`);
  }
}
