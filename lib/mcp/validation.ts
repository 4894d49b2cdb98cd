/**
 * What the MCP server registry accepts, with the limits stated once. Every refusal is an
 * `McpServerRefusedError` naming its field and its kind, so each API words it its own way
 * (the RAGFlow dialect answers RAGFlow's messages; the native API names the field).
 */
import { z } from 'zod';
import { EaselError } from '../errors';
import { MAX_SECRET_BYTES } from '../secrets/tenant-secrets';
import { MCP_SERVER_TYPES, type McpServerType } from './types';

/** RAGFlow's limit on a name, in UTF-8 bytes. */
export const MAX_MCP_NAME_BYTES = 255;
/** RAGFlow's column size for the URL. */
export const MAX_MCP_URL_BYTES = 2048;
export const MAX_MCP_HEADERS = 32;
export const MAX_MCP_HEADER_NAME_BYTES = 256;
/** A literal header value becomes a tenant secret: the secrets' own limit. */
export const MAX_MCP_HEADER_VALUE_BYTES = MAX_SECRET_BYTES;
export const MAX_MCP_DESCRIPTION_BYTES = 16 * 1024;
/** The variables as JSON, the cached tool list aside. */
export const MAX_MCP_VARIABLES_BYTES = 16 * 1024;
/** RAGFlow's default `timeout` for listing a server's tools (seconds), and the most Easel waits. */
export const DEFAULT_MCP_LIST_TIMEOUT_MS = 10_000;
export const MAX_MCP_LIST_TIMEOUT_MS = 60_000;

export type McpRefusal =
  | 'missing'
  | 'name_invalid'
  | 'name_taken'
  | 'type_unsupported'
  | 'url_invalid'
  | 'url_refused'
  | 'headers_invalid'
  | 'variables_invalid'
  | 'description_invalid'
  | 'tools_invalid'
  | 'secrets_unavailable';

/** A server the registry will not store, naming the field and why. */
export class McpServerRefusedError extends EaselError {
  constructor(
    readonly field: string,
    readonly reason: McpRefusal,
    message: string,
  ) {
    super('invalid_request', `${field}: ${message}`);
  }

  /** The message without the field in front. */
  get detail(): string {
    return this.message.slice(this.field.length + 2);
  }
}

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

/** `value` through `schema`, or the refusal of `field` with `message`. */
function field<S extends z.ZodType>(schema: S, name: string, reason: McpRefusal, message: string, value: unknown): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new McpServerRefusedError(name, reason, parsed.error.issues[0]?.code === 'custom' ? (parsed.error.issues[0]?.message ?? message) : message);
}

/** A lone UTF-16 surrogate: no UTF-8 text spells it, so no stored string may hold one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const wellFormed = (text: string) => !LONE_SURROGATE.test(text);

const NameSchema = z.lazy(() => z.string().refine((n) => n.trim() !== '' && bytes(n) <= MAX_MCP_NAME_BYTES && wellFormed(n)));
const ServerTypeSchema = z.lazy(() => z.enum(MCP_SERVER_TYPES));
const UrlSchema = z.lazy(() => z.string().trim().min(1).refine((u) => bytes(u) <= MAX_MCP_URL_BYTES, `at most ${MAX_MCP_URL_BYTES} bytes`).refine(wellFormed, 'not valid Unicode text'));
const DescriptionSchema = z.lazy(() => z.string().refine((d) => bytes(d) <= MAX_MCP_DESCRIPTION_BYTES, `at most ${MAX_MCP_DESCRIPTION_BYTES} bytes`).refine(wellFormed, 'not valid Unicode text').nullish().transform((d) => d ?? ''));
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** `${name}`/`$name` template variables (RAGFlow's `Template.safe_substitute`) may stand in a header's name. */
const TEMPLATED_NAME = /^(?:[!#$%&'*+.^_`|~0-9A-Za-z-]|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)+$/;
const HeaderNameSchema = z.lazy(() => z.string().refine((n) => bytes(n) <= MAX_MCP_HEADER_NAME_BYTES && (HEADER_NAME.test(n) || TEMPLATED_NAME.test(n))));
const HeaderValueSchema = z.lazy(() => z
  .string()
  .refine((v) => bytes(v) <= MAX_MCP_HEADER_VALUE_BYTES, `at most ${MAX_MCP_HEADER_VALUE_BYTES} bytes`)
  .refine((v) => !/[\r\n\0]/.test(v), 'a header value holds no line break or NUL')
  .refine(wellFormed, 'not valid Unicode text'));

export function checkName(name: unknown): string {
  return field(NameSchema, 'name', 'name_invalid', `a name is 1 to ${MAX_MCP_NAME_BYTES} bytes (UTF-8), not blank`, name);
}

export function checkServerType(type: unknown): McpServerType {
  return field(ServerTypeSchema, 'server_type', 'type_unsupported', `one of ${MCP_SERVER_TYPES.join(', ')}`, type);
}

/** The URL's shape; the SSRF guard's verdict is the registry's (it resolves names). */
export function checkUrlShape(url: unknown): string {
  return field(UrlSchema, 'url', 'url_invalid', 'a URL is required', url);
}

export function checkDescription(description: unknown): string {
  return field(DescriptionSchema, 'description', 'description_invalid', 'a string', description);
}

export function checkHeaders(headers: unknown): Record<string, string> {
  if (headers === undefined || headers === null) return {};
  if (typeof headers !== 'object' || Array.isArray(headers)) throw new McpServerRefusedError('headers', 'headers_invalid', 'an object of header names to string values');
  const entries = Object.entries(headers as Record<string, unknown>);
  if (entries.length > MAX_MCP_HEADERS) throw new McpServerRefusedError('headers', 'headers_invalid', `at most ${MAX_MCP_HEADERS} headers`);
  const out: Record<string, string> = {};
  for (const [name, value] of entries) {
    field(HeaderNameSchema, `headers.${name}`, 'headers_invalid', `a header name is 1 to ${MAX_MCP_HEADER_NAME_BYTES} token characters`, name);
    const checked = field(HeaderValueSchema, `headers.${name}`, 'headers_invalid', 'a header value is a string', value);
    Object.defineProperty(out, name, { value: checked, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** The variables without the cached tools (RAGFlow drops what a client sends there too). */
export function checkVariables(variables: unknown): Record<string, unknown> {
  if (variables === undefined || variables === null) return {};
  if (typeof variables !== 'object' || Array.isArray(variables)) throw new McpServerRefusedError('variables', 'variables_invalid', 'an object');
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(variables as Record<string, unknown>)) {
    if (name === 'tools') continue;
    Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
  }
  if (bytes(JSON.stringify(out)) > MAX_MCP_VARIABLES_BYTES) throw new McpServerRefusedError('variables', 'variables_invalid', `at most ${MAX_MCP_VARIABLES_BYTES} bytes as JSON`);
  return out;
}

/** RAGFlow's per-tool switch as a client sends it: `{name: {enabled}}` (other fields are the server's). */
const ToolSwitches = z.lazy(() => z.record(z.string(), z.looseObject({ enabled: z.boolean().optional() })));

export function checkToolSwitches(tools: unknown): Record<string, boolean> {
  if (tools === undefined || tools === null) return {};
  const parsed = ToolSwitches.safeParse(tools);
  if (!parsed.success) throw new McpServerRefusedError('tools', 'tools_invalid', 'an object of tool names to {enabled: boolean}');
  const out: Record<string, boolean> = {};
  for (const [name, tool] of Object.entries(parsed.data)) if (tool.enabled !== undefined) out[name] = tool.enabled;
  return out;
}

/** RAGFlow's `timeout` (seconds; a bad or non-positive value is the default), capped. */
export function listTimeoutMs(seconds: unknown): number {
  const n = typeof seconds === 'number' ? seconds : typeof seconds === 'string' && seconds.trim() !== '' ? Number(seconds) : Number.NaN;
  if (!Number.isFinite(n) || n <= 0) return DEFAULT_MCP_LIST_TIMEOUT_MS;
  return Math.min(Math.round(n * 1000), MAX_MCP_LIST_TIMEOUT_MS);
}
