/**
 * `npm run keys -- create [--name n] [--scope admin|execute] [--workflows id1,id2] | list | revoke <id>`
 *
 * Manages the API keys of a running server through its key routes (admin only): EASEL_BASE_URL
 * (default http://127.0.0.1:3000) and EASEL_API_KEY (an admin key) come from the environment.
 * `create` prints the new secret once, alone on stdout (details go to stderr), so
 * `KEY=$(npm run -s keys -- create ...)` works. Exit codes: 0 done, 1 refused or unreachable,
 * 2 usage.
 */
import { parseArgs } from 'node:util';
import { ConfigError, readCliConfig } from '../config';

const USAGE = `usage: npm run keys -- <command>
  create [--name <name>] [--scope admin|execute] [--workflows <id1,id2>]
         a new key; --workflows implies --scope execute; the secret is printed once
  list   the keys of the tenant
  revoke <id>
         revoke a key (the server may accept it for up to 30 s more: it caches keys)
environment: EASEL_API_KEY (an admin key, required), EASEL_BASE_URL (default http://127.0.0.1:3000)`;

class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

interface KeyView {
  id: string;
  name: string;
  scope: string;
  workflow_ids: string[];
  created_at: string;
  revoked_at: string | null;
  key?: string;
}

async function runKeysCli(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const info = (line: string) => process.stderr.write(`${line}\n`);
  try {
    const { values, positionals } = (() => {
      try {
        return parseArgs({
          args: [...argv],
          allowPositionals: true,
          options: { name: { type: 'string' }, scope: { type: 'string' }, workflows: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
        });
      } catch (error) {
        throw new CliError(`${(error as Error).message}\n${USAGE}`, 2);
      }
    })();
    const [command, ...rest] = positionals;
    if (values.help || command === 'help') {
      out(USAGE);
      return 0;
    }
    const expectArgs = (n: number) => {
      if (rest.length !== n) throw new CliError(`${command} takes ${n === 0 ? 'no argument' : `${n} argument`}\n${USAGE}`, 2);
    };
    if (command !== 'create' && (values.name !== undefined || values.scope !== undefined || values.workflows !== undefined)) {
      throw new CliError(`--name, --scope and --workflows go with create\n${USAGE}`, 2);
    }
    let cli;
    try {
      cli = readCliConfig(env);
    } catch (error) {
      if (error instanceof ConfigError) throw new CliError(error.problems.join('; '), 2);
      throw error;
    }
    const base = cli.baseUrl;
    const apiKey = cli.apiKey;
    switch (command) {
      case 'create': {
        expectArgs(0);
        const workflowIds = (values.workflows ?? '').split(',').map((s) => s.trim()).filter(Boolean);
        const scope = values.scope ?? (workflowIds.length > 0 ? 'execute' : 'admin');
        if (scope !== 'admin' && scope !== 'execute') throw new CliError(`--scope must be admin or execute, got "${scope}"`, 2);
        if (scope === 'execute' && workflowIds.length === 0) throw new CliError('an execute key needs --workflows id1,id2', 2);
        if (scope === 'admin' && workflowIds.length > 0) throw new CliError('--workflows goes with --scope execute (an admin key may use every workflow)', 2);
        const name = values.name ?? `${scope} key created ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`;
        const key = (await request(base, requireKey(apiKey), 'POST', '/workflows/v1/keys', { name, scope, workflow_ids: workflowIds })) as KeyView;
        info(`Created ${key.scope} key ${key.id} "${key.name}"${key.workflow_ids.length ? ` for ${key.workflow_ids.join(', ')}` : ''}.`);
        info('Its secret, shown this once (store it now):');
        out(key.key ?? '');
        return 0;
      }
      case 'list': {
        expectArgs(0);
        const { items } = (await request(base, requireKey(apiKey), 'GET', '/workflows/v1/keys')) as { items: KeyView[] };
        if (items.length === 0) {
          info('No keys.');
          return 0;
        }
        const rows = items
          .sort((a, b) => a.created_at.localeCompare(b.created_at))
          .map((k) => [k.id, k.scope, k.revoked_at ? `revoked ${k.revoked_at}` : 'active', k.created_at, k.name, k.workflow_ids.join(',')]);
        for (const row of table([['ID', 'SCOPE', 'STATUS', 'CREATED', 'NAME', 'WORKFLOWS'], ...rows])) out(row);
        return 0;
      }
      case 'revoke': {
        expectArgs(1);
        const id = rest[0] as string;
        if (!/^[0-9a-f]{16}$/.test(id)) throw new CliError(`"${id}" is not a key id (16 hex characters); \`npm run keys -- list\` shows them`, 2);
        await request(base, requireKey(apiKey), 'DELETE', `/workflows/v1/keys/${encodeURIComponent(id)}`);
        out(`Revoked ${id} (servers that cached it may accept it for up to 30 s more).`);
        return 0;
      }
      case undefined:
        throw new CliError(USAGE, 2);
      default:
        throw new CliError(`unknown command "${command}"\n${USAGE}`, 2);
    }
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    info(error.exitCode === 2 && error.message.startsWith('usage') ? error.message : `keys: ${error.message}`);
    return error.exitCode;
  }
}

function requireKey(apiKey: string | undefined): string {
  if (!apiKey) throw new CliError('set EASEL_API_KEY to an admin key of the server (npm start prints one)', 2);
  return apiKey;
}

async function request(base: string, apiKey: string, method: string, path: string, body?: unknown): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (error as Error).message;
    throw new CliError(`cannot reach the Easel server at ${base} (${why}): is \`npm start\` running? (EASEL_BASE_URL names the server)`);
  }
  const text = await response.text();
  let parsed: { code?: string; error?: string } | undefined;
  try {
    parsed = text ? (JSON.parse(text) as typeof parsed) : undefined;
  } catch {
    parsed = undefined;
  }
  if (response.ok) return parsed;
  const detail = parsed?.error ? `${parsed.code ?? response.status}: ${parsed.error}` : `HTTP ${response.status}`;
  if (response.status === 401) throw new CliError(`the server refused EASEL_API_KEY (401 ${detail}): it is unknown or revoked`);
  if (response.status === 403) throw new CliError(`EASEL_API_KEY is not an admin key (403 ${detail}): keys are managed with an admin key`);
  if (response.status === 404 && method === 'DELETE') throw new CliError(`no such key (${detail}); \`npm run keys -- list\` shows the ids`);
  throw new CliError(`the server answered ${response.status} (${detail})`);
}

function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd());
}

process.exitCode = await runKeysCli(process.argv.slice(2), process.env);
