/**
 * The headers a session with an MCP server sends, built as RAGFlow builds them
 * (common/mcp_tool_call_conn.py): the server's headers with `${var}` replaced from its
 * variables (Python's `Template.safe_substitute`: `$var`, `${var}`, `$$`; unknown names left as
 * they are), a header dropped when its name is blank or its value is blank or a bare `Bearer`;
 * then the Agent's `custom_header`, substituted from itself, over them. Last, `{secret.NAME}` in
 * a value is replaced by the tenant's secret, read when the session opens; a secret that is not
 * set fails the session with an error naming it (and the header), never a value.
 *
 * @example
 *   await mcpHeaders(server, { 'X-Trace': 'on' }, secret)
 *   // { headers: { authorization: 'Bearer <the value>', 'x-trace': 'on' }, secrets: ['<the value>'] }
 */
import { ToolError } from '../tools/errors';
import type { McpServerConnection } from './types';

export interface McpHeaders {
  /** Lower-case names. */
  headers: Record<string, string>;
  /** The secret values filled in, to redact them from whatever comes back. */
  secrets: string[];
}

const SECRET_REFERENCE = /\{secret\.([A-Za-z_][A-Za-z0-9_]{0,63})\}/g;
const TEMPLATE = /\$(?:(\$)|([_a-z][_a-z0-9]*)|\{([_a-z][_a-z0-9]*)\}|)/gi;

export async function mcpHeaders(
  server: Pick<McpServerConnection, 'name' | 'headers' | 'variables'>,
  custom: Readonly<Record<string, string>> | undefined,
  secret: (name: string) => string | undefined | Promise<string | undefined>,
): Promise<McpHeaders> {
  const written: [string, string][] = [];
  for (const [name, value] of Object.entries(server.headers ?? {})) {
    const h = safeSubstitute(name, server.variables ?? {});
    const v = safeSubstitute(String(value), server.variables ?? {});
    if (h.trim() === '' || /^(Bearer)?$/.test(v.trim())) continue;
    written.push([h, v]);
  }
  for (const [name, value] of Object.entries(custom ?? {})) {
    written.push([safeSubstitute(name, custom ?? {}), safeSubstitute(String(value), custom ?? {})]);
  }

  const headers: Record<string, string> = {};
  const secrets = new Set<string>();
  for (const [name, value] of written) {
    let resolved = '';
    let last = 0;
    for (const match of value.matchAll(SECRET_REFERENCE)) {
      const secretName = match[1] as string;
      const found = await secret(secretName);
      if (found === undefined) {
        throw new ToolError(`MCP server "${server.name}": the header ${JSON.stringify(name.trim())} uses the tenant secret ${secretName}, which is not set`);
      }
      resolved += value.slice(last, match.index) + found;
      last = match.index + match[0].length;
      if (found !== '') secrets.add(found);
    }
    headers[name.trim().toLowerCase()] = (resolved + value.slice(last)).trim();
  }
  return { headers, secrets: [...secrets] };
}

/** Python's `string.Template(text).safe_substitute(values)`. */
export function safeSubstitute(text: string, values: Readonly<Record<string, unknown>>): string {
  return text.replace(TEMPLATE, (whole, escaped: string | undefined, named: string | undefined, braced: string | undefined) => {
    if (escaped) return '$';
    const key = named ?? braced;
    if (key === undefined || !Object.hasOwn(values, key)) return whole;
    return pythonStr(values[key]);
  });
}

/** What `str(value)` shows for the plain JSON values variables hold. */
function pythonStr(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (typeof value === 'number') return String(value);
  return JSON.stringify(value);
}
