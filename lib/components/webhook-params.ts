/**
 * Begin's webhook settings (`mode: "Webhook"`), in the shape RAGFlow's DSL carries them:
 *
 *   {"mode": "Webhook", "methods": ["POST"], "content_types": "application/json",
 *    "security": {"auth_type": "token", "token": {"token_header": "X-Token", "token_value": "…"},
 *                 "rate_limit": {"limit": 60, "per": "minute"}, "max_body_size": "1MB", "ip_whitelist": []},
 *    "schema": {"body": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
 *    "execution_mode": "Immediately" | "Streaming",
 *    "response": {"status": 200, "body_template": "{\"ok\": true}"}}
 *
 * Credentials never stay in a stored DSL: at import `token_value`, `basic_auth.password` and
 * `jwt.secret` move into the tenant's secrets (lib/webhooks/credentials.ts) and the DSL keeps
 * `token_ref`, `password_ref`, `secret_ref`. Either form validates here. What Easel does not do
 * is refused by name: auth types other than none/token/basic/jwt, JWT algorithms other than
 * HS256/384/512, `file` fields in the schema.
 */
import { z } from 'zod';
import { parseCidr, parseIp } from '../outbound/ip';

export const WEBHOOK_METHODS = ['POST', 'GET', 'PUT', 'PATCH', 'DELETE', 'HEAD'] as const;
export const WEBHOOK_CONTENT_TYPES = ['application/json', 'multipart/form-data', 'application/x-www-form-urlencoded', 'text/plain', 'application/octet-stream'] as const;
export const WEBHOOK_AUTH_TYPES = ['none', 'token', 'basic', 'jwt'] as const;
export const JWT_ALGORITHMS = ['HS256', 'HS384', 'HS512'] as const;
export const RATE_WINDOWS = { second: 1, minute: 60, hour: 3600, day: 86_400 } as const;
/** RAGFlow's ceiling for `max_body_size`. */
export const MAX_WEBHOOK_BODY_BYTES = 10 * 1024 * 1024;
/** The handle of a credential moved into the tenant's secrets. */
export const CREDENTIAL_REF = /^whs_[0-9a-f]{24}$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;

/** Types of a schema field: JSON Schema's, and RAGFlow's `array<T>`. */
const SCALAR_TYPES = ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'];
const TYPE_PATTERN = /^(string|number|integer|boolean|object|array|null)$|^array<(string|number|integer|boolean|object)>$/;

/** A field of `schema.query/headers/body`: the JSON Schema subset RAGFlow's editor writes. */
export interface FieldSchema {
  type?: string;
  properties?: Record<string, FieldSchema>;
  required?: string[];
  items?: FieldSchema;
  enum?: unknown[];
  description?: string;
}

const fieldType = z.lazy(() => z
  .string()
  .transform((t) => t.trim().toLowerCase())
  .refine((t) => t !== 'file', 'file fields are not supported in webhook deliveries (upload files with POST /workflows/v1/files)')
  .refine((t) => t === 'file' || TYPE_PATTERN.test(t), `must be one of ${SCALAR_TYPES.join(', ')} or array<T>`));

export const fieldSchema: z.ZodType<FieldSchema> = z.lazy(() =>
  z.looseObject({
    type: fieldType.optional(),
    properties: z.record(z.string().min(1).max(128), fieldSchema).optional(),
    required: z.array(z.string().min(1).max(128)).max(200).optional(),
    items: fieldSchema.optional(),
    enum: z.array(z.unknown()).min(1).max(500).optional(),
    description: z.string().optional(),
  }),
) as z.ZodType<FieldSchema>;

/** A string or a list of them, as RAGFlow's single and multi selects write it. */
const oneOrMany = <T extends string>(values: readonly T[], what: string, normalise: (s: string) => string) =>
  z
    .union([z.string(), z.array(z.string())])
    .nullish()
    .transform((v) => (v === null || v === undefined || v === '' ? [] : [v].flat().map(normalise)))
    .pipe(z.array(z.enum(values as unknown as [T, ...T[]], { error: `each ${what} must be one of ${values.join(', ')}` })));

/** RAGFlow's `_is_truthy`: true, a non-zero number, or "1"/"true"/"yes"/"on". */
function truthy(value: unknown): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'string') return ['1', 'true', 'yes', 'on'].includes(value.trim().toLowerCase());
  return false;
}

const secretValue = z.lazy(() => z.string().min(1, 'must not be empty').max(1024, 'must be at most 1024 characters'));
const ref = z.lazy(() => z.string().regex(CREDENTIAL_REF, 'names a credential this tenant stored at import (whs_ and 24 hex digits)'));

const security = z.lazy(() => z
  .looseObject({
    auth_type: z
      .string()
      .nullish()
      .transform((t) => (t ? t.trim().toLowerCase() : 'none'))
      .pipe(z.enum(WEBHOOK_AUTH_TYPES, { error: `must be one of ${WEBHOOK_AUTH_TYPES.join(', ')} (other authentication is not supported)` })),
    allow_anonymous: z.unknown().optional().transform(truthy),
    token: z
      .looseObject({
        token_header: z.string().regex(HEADER_NAME, 'must be an HTTP header name'),
        token_value: secretValue.optional(),
        token_ref: ref.optional(),
      })
      .nullish(),
    basic_auth: z
      .looseObject({
        username: z.string().min(1, 'must not be empty').max(256).refine((u) => !u.includes(':'), 'must not contain ":"'),
        password: secretValue.optional(),
        password_ref: ref.optional(),
      })
      .nullish(),
    jwt: z
      .looseObject({
        secret: secretValue.optional(),
        secret_ref: ref.optional(),
        algorithm: z
          .string()
          .nullish()
          .transform((a) => (a ? a.trim().toUpperCase() : 'HS256'))
          .pipe(z.enum(JWT_ALGORITHMS, { error: `must be one of ${JWT_ALGORITHMS.join(', ')} (public-key algorithms are not supported)` })),
        audience: z.string().max(512).nullish().transform((v) => v || undefined),
        issuer: z.string().max(512).nullish().transform((v) => v || undefined),
        required_claims: z
          .union([z.string(), z.array(z.string())])
          .nullish()
          .transform((v) => [v ?? []].flat().map((c) => c.trim()).filter(Boolean))
          .refine((claims) => !claims.some((c) => ['exp', 'sub', 'aud', 'iss', 'nbf', 'iat'].includes(c)), 'a reserved claim (exp, sub, aud, iss, nbf, iat) cannot be required'),
      })
      .nullish(),
    ip_whitelist: z.array(z.string().min(1).max(64)).max(100).nullish().transform((v) => v ?? []),
    rate_limit: z
      .looseObject({
        limit: z.union([z.number(), z.string().regex(/^\d+$/).transform(Number)]).pipe(z.number().int('must be a whole number').min(1, 'must be > 0').max(1_000_000)),
        per: z
          .string()
          .nullish()
          .transform((p) => (p ? p.trim().toLowerCase() : 'minute'))
          .pipe(z.enum(Object.keys(RATE_WINDOWS) as [keyof typeof RATE_WINDOWS], { error: `must be one of ${Object.keys(RATE_WINDOWS).join(', ')}` })),
      })
      .nullish(),
    max_body_size: z
      .string()
      .nullish()
      .transform((s, ctx) => {
        if (!s) return undefined;
        const m = /^\s*(\d+)\s*(kb|mb)\s*$/i.exec(s);
        if (!m) {
          ctx.issues.push({ code: 'custom', message: 'must be a size like "512KB" or "5MB"', input: s });
          return z.NEVER;
        }
        const bytes = Number(m[1]) * ((m[2] as string).toLowerCase() === 'kb' ? 1024 : 1024 * 1024);
        if (bytes > MAX_WEBHOOK_BODY_BYTES) {
          ctx.issues.push({ code: 'custom', message: 'must be at most 10MB', input: s });
          return z.NEVER;
        }
        return bytes;
      }),
  })
  .superRefine((s, ctx) => {
    const need = (ok: boolean, path: string[], message: string) => {
      if (!ok) ctx.addIssue({ code: 'custom', path, message });
    };
    if (s.auth_type === 'token') {
      need(Boolean(s.token), ['token'], 'token authentication needs {token_header, token_value}');
      need(!s.token || Boolean(s.token.token_value ?? s.token.token_ref), ['token', 'token_value'], 'is required');
    }
    if (s.auth_type === 'basic') {
      need(Boolean(s.basic_auth), ['basic_auth'], 'basic authentication needs {username, password}');
      need(!s.basic_auth || Boolean(s.basic_auth.password ?? s.basic_auth.password_ref), ['basic_auth', 'password'], 'is required');
    }
    if (s.auth_type === 'jwt') need(Boolean(s.jwt?.secret ?? s.jwt?.secret_ref), ['jwt', 'secret'], 'JWT authentication needs the secret it is signed with');
    s.ip_whitelist.forEach((rule, i) => need(isIpRule(rule), ['ip_whitelist', String(i)], `"${rule}" is not an IP address or CIDR`));
  }));

export type WebhookSecurity = z.output<typeof security>;

export const webhookConfigSchema = z.lazy(() => z
  .looseObject({
    methods: oneOrMany(WEBHOOK_METHODS, 'method', (m) => m.trim().toUpperCase()),
    content_types: oneOrMany(WEBHOOK_CONTENT_TYPES, 'content type', (t) => t.trim().toLowerCase()),
    // RAGFlow refuses every delivery of a webhook without security; so does Easel (401)
    security: security.nullish().transform((s) => s ?? null),
    schema: z
      .looseObject({ query: fieldSchema.nullish(), headers: fieldSchema.nullish(), body: fieldSchema.nullish() })
      .nullish()
      .transform((s) => ({ query: s?.query ?? undefined, headers: s?.headers ?? undefined, body: s?.body ?? undefined })),
    execution_mode: z
      .string()
      .nullish()
      .transform((m) => (m ? m.trim().toLowerCase() : 'immediately'))
      .pipe(z.enum(['immediately', 'streaming'], { error: 'must be "Immediately" (answer at once, run on the worker) or "Streaming" (run, then answer the result)' }))
      .transform((m) => (m === 'immediately' ? ('Immediately' as const) : ('Streaming' as const))),
    response: z
      .looseObject({
        status: z
          .union([z.number(), z.string().regex(/^\d+$/, 'must be a status code').transform(Number)])
          .nullish()
          .pipe(z.number().int().min(200, 'must be between 200 and 399').max(399, 'must be between 200 and 399').nullish()),
        body_template: z.string().max(64 * 1024).nullish(),
      })
      .nullish()
      .transform((r) => ({ status: r?.status ?? undefined, body_template: r?.body_template || undefined })),
  })
  .superRefine((w, ctx) => {
    // what authenticates a delivery never reaches the workflow
    const guarded = new Set(['authorization']);
    if (w.security?.auth_type === 'token' && w.security.token) guarded.add(w.security.token.token_header.toLowerCase());
    for (const name of Object.keys(w.schema.headers?.properties ?? {})) {
      if (guarded.has(name.toLowerCase())) {
        ctx.addIssue({ code: 'custom', path: ['schema', 'headers', 'properties', name], message: 'the header that authenticates a delivery is never passed to the workflow' });
      }
    }
  }));

export type WebhookConfig = z.output<typeof webhookConfigSchema>;

/** An IPv4/IPv6 address, or a CIDR. */
export function isIpRule(rule: string): boolean {
  return rule.includes('/') ? parseCidr(rule.trim()) !== null : parseIp(rule.trim()) !== null;
}
