/**
 * What every built-in tool's params and arguments have in common: RAGFlow's defaults for
 * params a DSL leaves out, the `description` / `function_name` overrides, credentials that are
 * tenant secrets (never the DSL's text), and arguments checked before anything is sent.
 */
import { z } from 'zod';
import { ToolError } from './errors';
import type { ToolContext } from './types';

/** `{secret.NAME}`: the only form a credential may take in a DSL. */
export const SECRET_REFERENCE = /^\{secret\.([A-Za-z_][A-Za-z0-9_]{0,63})\}$/;

/** A DSL value or, when absent or null, RAGFlow's default. */
export const withDefault = <T extends z.ZodType>(schema: T, fallback: z.output<T>) => schema.nullish().transform((v) => v ?? fallback);

/** Every tool entry may rename its function and reword its description for the model. */
export const functionShape = () => ({
  /** Shown to the model; the tool's own when empty. */
  description: z.string().nullish(),
  function_name: z.string().regex(/^[A-Za-z0-9_-]{1,56}$/, 'must be 1-56 letters, digits, _ or -').nullish(),
});

/**
 * A credential param (`api_key`, `password`): empty, or a `{secret.NAME}` reference. Empty
 * means the tenant secret `defaultSecret`. The message never repeats the value.
 */
export function credentialParam(param: string, defaultSecret: string) {
  return z
    .string()
    .nullish()
    .transform((v) => v?.trim() ?? '')
    .refine((v) => v === '' || SECRET_REFERENCE.test(v), {
      message: `${param} must not hold the credential itself: store it as a tenant secret and write {secret.NAME} (left empty, the secret ${defaultSecret} is used)`,
    });
}

/**
 * The credential for one call: the secret the param names, else the tenant's `defaultSecret`.
 * Missing, it is a permanent error the model reads, saying which secret to set; nothing is sent.
 * With `optional`, a missing default secret is `undefined` instead (services that work without
 * a key, with lower limits).
 */
export async function resolveCredential(
  tool: string,
  service: string,
  param: { name: string; value: string; defaultSecret: string },
  ctx: ToolContext,
  options: { optional?: boolean } = {},
): Promise<string | undefined> {
  const named = SECRET_REFERENCE.exec(param.value)?.[1];
  const secretName = named ?? param.defaultSecret;
  const value = (await ctx.services.secret?.(secretName))?.trim();
  if (value) return value;
  if (!named && options.optional) return undefined;
  throw new ToolError(
    named
      ? `tool "${tool}": ${service} is not configured: the secret ${secretName} named by ${param.name} is not set for this tenant`
      : `tool "${tool}": ${service} is not configured: set the tenant secret ${param.defaultSecret}, or write {secret.NAME} in ${param.name}`,
  );
}

/** The model's arguments checked against `schema`; a permanent error names each bad field. */
export function parseToolArgs<T extends z.ZodType>(tool: string, schema: T, args: Record<string, unknown>): z.output<T> {
  const parsed = schema.safeParse(args);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`);
  throw new ToolError(`tool "${tool}": invalid arguments: ${problems.join('; ')}`);
}

/** A service's answer checked against `schema`; anything else is a permanent error. */
export function parseServiceAnswer<T extends z.ZodType>(tool: string, service: string, schema: T, body: unknown): z.output<T> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw new ToolError(`tool "${tool}": ${service} answered with an unexpected body (${parsed.error.issues[0]?.message ?? 'invalid'})`);
}

/**
 * A whole number of at least `min`, also written as text (`"6"`, as RAGFlow's forms store some);
 * `message` names the param as RAGFlow's checks do.
 */
export function integerParam(min: number, message: string) {
  return z
    .union([z.number(), z.string().trim().regex(/^-?\d+$/, message).transform(Number)], { error: message })
    .pipe(z.number({ error: message }).int(message).min(min, message));
}

/** A search's `top_n`: RAGFlow's `check_positive_integer`, its default when the DSL leaves it out. */
export function topNParam(description: string, fallback: number) {
  const message = `${description} should be a positive integer`;
  return withDefault(z.number(message).int(message).min(1, message), fallback);
}
