/**
 * Credentials of MCP servers never stay in the registry: every header value given literally,
 * `variables.authorization_token`, and every variable a header's `${name}` template takes, when
 * given literally, is moved into the tenant's secrets, and the server keeps `{secret.NAME}` in
 * its place. A value that already references a secret (`{secret.NAME}`) or a variable (`${x}`)
 * is kept as it is: it holds no credential itself.
 *
 * Secret names are `MCP_<SERVER>_<HEADER OR VARIABLE>` in upper case, other characters as `_`,
 * with `_2`, `_3`, ... when the name is taken already (by anyone: a tenant's own secret is never
 * overwritten, nor a value the server still uses until its new one is stored).
 *
 * @example
 *   planCredentials({ name: 'GitHub', headers: { Authorization: 'Bearer ghp_…' }, variables: {}, taken: new Set() })
 *   // headers: { Authorization: '{secret.MCP_GITHUB_AUTHORIZATION}' }, writes: [{ name: 'MCP_GITHUB_AUTHORIZATION', value: 'Bearer ghp_…', field: 'headers.Authorization' }]
 */

/** `{secret.NAME}` anywhere in a value. */
const SECRET_REFERENCE = /\{secret\.[A-Za-z_][A-Za-z0-9_]{0,63}\}/;
/** `${name}` or `$name`, as Python's `string.Template` reads them. */
const TEMPLATE_VARIABLE = /\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g;
/** RAGFlow's variable for a server's token (its import writes it there). */
export const AUTHORIZATION_TOKEN = 'authorization_token';

export interface SecretWrite {
  name: string;
  value: string;
  /** Where the value was: `headers.<name>` or `variables.<name>`. */
  field: string;
}

export interface CredentialPlan {
  headers: Record<string, string>;
  variables: Record<string, unknown>;
  /** Secrets to store before the server is. */
  writes: SecretWrite[];
}

/** Whether a value references something rather than holding it. */
export function isReference(value: string): boolean {
  TEMPLATE_VARIABLE.lastIndex = 0;
  return SECRET_REFERENCE.test(value) || TEMPLATE_VARIABLE.test(value);
}

/** The variables a header's templates take, in its names and values. */
export function templateVariables(headers: Record<string, string>): Set<string> {
  const found = new Set<string>();
  for (const [name, value] of Object.entries(headers)) {
    for (const m of `${name} ${value}`.matchAll(TEMPLATE_VARIABLE)) found.add((m[1] ?? m[2]) as string);
  }
  return found;
}

/**
 * The headers and variables to store, and the secrets to write first. `taken` holds every
 * secret name of the tenant (the server's own included): new names avoid them all.
 */
export function planCredentials(input: { name: string; headers: Record<string, string>; variables: Record<string, unknown>; taken: ReadonlySet<string> }): CredentialPlan {
  const taken = new Set(input.taken);
  const writes: SecretWrite[] = [];
  const move = (field: string, part: string, value: string): string => {
    const name = freeName(secretStem(input.name, part), taken);
    taken.add(name);
    writes.push({ name, value, field });
    return `{secret.${name}}`;
  };
  const headers: Record<string, string> = {};
  for (const [header, value] of Object.entries(input.headers)) {
    const kept = value === '' || isReference(value) ? value : move(`headers.${header}`, header, value);
    Object.defineProperty(headers, header, { value: kept, enumerable: true, writable: true, configurable: true });
  }
  const credentials = templateVariables(input.headers);
  credentials.add(AUTHORIZATION_TOKEN);
  const variables: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(input.variables)) {
    const literal = credentials.has(name) && typeof value === 'string' && value !== '' && !isReference(value);
    Object.defineProperty(variables, name, { value: literal ? move(`variables.${name}`, name, value) : value, enumerable: true, writable: true, configurable: true });
  }
  return { headers, variables, writes };
}

/** The secret names a server's headers and variables reference. */
export function referencedSecrets(headers: Record<string, string>, variables: Record<string, unknown>): Set<string> {
  const found = new Set<string>();
  const scan = (text: string) => {
    for (const m of text.matchAll(/\{secret\.([A-Za-z_][A-Za-z0-9_]{0,63})\}/g)) found.add(m[1] as string);
  };
  for (const value of Object.values(headers)) scan(value);
  for (const [name, value] of Object.entries(variables)) if (name !== 'tools' && typeof value === 'string') scan(value);
  return found;
}

/** `MCP_<SERVER>_<PART>`, within the 64 characters of a secret name (room left for a suffix). */
function secretStem(server: string, part: string): string {
  const word = (text: string, max: number) => text.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_+|_+$/g, '').slice(0, max).replace(/_+$/, '');
  const serverWord = word(server, 28) || 'SERVER';
  const partWord = word(part, 28) || 'VALUE';
  return `MCP_${serverWord}_${partWord}`;
}

function freeName(stem: string, taken: ReadonlySet<string>): string {
  if (!taken.has(stem)) return stem;
  for (let n = 2; ; n++) {
    const name = `${stem}_${n}`;
    if (!taken.has(name)) return name;
  }
}
