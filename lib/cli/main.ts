/**
 * `easel` (bin/easel.js runs this through tsx): workflows, runs, an interactive chat and keys,
 * against a running server's native API. The server and the key come from --base-url / --key
 * or EASEL_BASE_URL / EASEL_API_KEY (lib/config.ts readCliConfig). Results go to stdout,
 * explanations to stderr. Exit codes: 0 done, 1 refused / unreachable / the workflow failed,
 * 2 usage.
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';
import { isTemplateFile, templateFields } from '../canvas/template-file';
import { ConfigError, readCliConfig } from '../config';
import { chat, printedTurn } from './chat';
import { CliError, EaselClient, type ExecuteBody, type RunState } from './client';
import { replay, type ReplayOptions } from './replay';
import { type Io, table } from './terminal';

export const USAGE = `usage: npx easel <command> [options]   (in this repository; \`easel\` where the package is installed)

Workflows (admin key):
  workflows create <file.json|-> [--name <name>] [--description <text>] [--drop-unsupported-tools]
      the file is a RAGFlow DSL, {name, description, dsl}, or a RAGFlow template file
      ({title: {en, ...}, description, canvas_type, dsl}: its English title and description
      are taken); prints the new id, and what the import changed or warns of on stderr.
      --drop-unsupported-tools leaves out Agent tools Easel does not offer (Bing,
      DuckDuckGo, ...) instead of refusing the file, and names each one dropped
  workflows list
  workflows versions <workflow>
  workflows activate <workflow> <version>

Runs:
  run <workflow> [--query <text>] [--inputs <json>] [--run-id <id>] [--turn <n>] [--async]
      one turn: messages stream to stdout, the outcome goes to stderr; with --async the
      server's worker runs it and its events are followed until it commits
  chat <workflow> [--run-id <id>]
      a conversation: messages stream, forms are asked field by field

Replays (admin key):
  replay <workflow> --version <n> (--runs <id1,id2> | --sample <n> [--since <ISO time>]) [--refuse]
      replays recorded runs against a version: the server's worker feeds each recorded turn's
      inputs to that version and answers its calls from the turns' records where it makes the
      same ones; a progress bar (stderr) until every run is done, then the runs that did not
      behave the same and the calls that went live (stdout). --refuse stops a run at its first
      call that would go live instead of making it

Keys (admin key):
  keys create [--name <name>] [--scope admin|execute] [--workflows <id1,id2>]
      prints the secret once
  keys list
  keys revoke <key id>

Options:
  --base-url <url>  the server (EASEL_BASE_URL; default http://127.0.0.1:3000)
  --key <key>       the API key (EASEL_API_KEY)
  --json            print the API's JSON instead of text
  -h, --help        this text
Exit codes: 0 done, 1 refused, unreachable or the workflow failed, 2 usage.`;

const OPTIONS = {
  'base-url': { type: 'string' },
  key: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  name: { type: 'string' },
  description: { type: 'string' },
  query: { type: 'string', short: 'q' },
  inputs: { type: 'string' },
  'run-id': { type: 'string' },
  turn: { type: 'string' },
  scope: { type: 'string' },
  workflows: { type: 'string' },
  async: { type: 'boolean' },
  'drop-unsupported-tools': { type: 'boolean' },
  version: { type: 'string' },
  runs: { type: 'string' },
  sample: { type: 'string' },
  since: { type: 'string' },
  refuse: { type: 'boolean' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** Options each command takes besides the global ones. */
const COMMAND_OPTIONS: Record<string, (keyof typeof OPTIONS)[]> = {
  'workflows create': ['name', 'description', 'drop-unsupported-tools'],
  run: ['query', 'inputs', 'run-id', 'turn', 'async'],
  chat: ['run-id'],
  'keys create': ['name', 'scope', 'workflows'],
  replay: ['version', 'runs', 'sample', 'since', 'refuse'],
};
const GLOBAL_OPTIONS = new Set<string>(['base-url', 'key', 'json', 'help']);

const usage = (message: string) => new CliError(`${message}\n\n${USAGE}`, 2);

export function processIo(): Io {
  return { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env };
}

export async function main(argv: readonly string[], io: Io = processIo()): Promise<number> {
  try {
    return await dispatch(argv, io);
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    io.stderr.write(`easel: ${error.message}\n`);
    return error.exitCode;
  }
}

async function dispatch(argv: readonly string[], io: Io): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw usage((error as Error).message);
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || command === 'help' || command === undefined) {
    if (command === undefined && !values.help) throw usage('no command given');
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const sub = command === 'workflows' || command === 'keys' ? rest.shift() : undefined;
  const name = sub ? `${command} ${sub}` : command;
  const allowed = COMMAND_OPTIONS[name] ?? [];
  for (const option of Object.keys(values)) {
    if (!GLOBAL_OPTIONS.has(option) && !allowed.includes(option as keyof typeof OPTIONS)) throw usage(`--${option} does not go with "${name}"`);
  }
  const args = (n: number, what: string) => {
    if (rest.length !== n) throw usage(`"${name}" takes ${what}`);
    return rest as string[];
  };
  const out = (line: string) => io.stdout.write(`${line}\n`);
  const info = (line: string) => io.stderr.write(`${line}\n`);

  switch (name) {
    case 'workflows create': {
      const [file] = args(1, 'a file (or - for stdin)');
      const body = { ...(await workflowFile(file as string, values, io)), ...(values['drop-unsupported-tools'] ? { drop_unsupported_tools: true } : {}) };
      const created = await client(values, io).json<{ id: string; name: string; version: number; webhook_url?: string; warnings?: { message: string }[] }>('POST', '/workflows/v1/workflows', body);
      if (values.json) return json(io, created);
      info(`Created workflow ${created.id} "${created.name}" (version ${created.version}).`);
      for (const warning of created.warnings ?? []) info(`! ${warning.message}`);
      if (created.webhook_url) info(`Webhook: ${created.webhook_url}`);
      out(created.id);
      return 0;
    }
    case 'workflows list': {
      args(0, 'no argument');
      const api = client(values, io);
      const items: { id: string; name: string; updated_at: string }[] = [];
      let cursor: string | null = null;
      do {
        const page: { items: typeof items; next_cursor: string | null } = await api.json('GET', `/workflows/v1/workflows?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        items.push(...page.items);
        cursor = page.next_cursor;
      } while (cursor);
      if (values.json) return json(io, { items });
      if (items.length === 0) info('No workflows.');
      else for (const row of table([['ID', 'UPDATED', 'NAME'], ...items.map((w) => [w.id, w.updated_at, w.name])])) out(row);
      return 0;
    }
    case 'workflows versions': {
      const [id] = args(1, 'a workflow id') as [string];
      const { items } = await client(values, io).json<{ items: { version: number; created_at: string; active: boolean }[] }>('GET', `/workflows/v1/workflows/${encodeURIComponent(id)}/versions`, undefined, `workflow "${id}"`);
      if (values.json) return json(io, { items });
      for (const row of table([['VERSION', 'CREATED', 'ACTIVE'], ...items.map((v) => [String(v.version), v.created_at, v.active ? 'active' : ''])])) out(row);
      return 0;
    }
    case 'workflows activate': {
      const [id, n] = args(2, 'a workflow id and a version number') as [string, string];
      if (!/^[1-9]\d*$/.test(n)) throw usage(`"${n}" is not a version number`);
      const wf = await client(values, io).json<{ id: string; active_version: number; latest_version: number }>('POST', `/workflows/v1/workflows/${encodeURIComponent(id)}/versions/${n}/activate`, undefined, `workflow "${id}" version ${n}`);
      if (values.json) return json(io, wf);
      out(`Workflow ${wf.id}: version ${wf.active_version} is active (latest ${wf.latest_version}); new runs start on it.`);
      return 0;
    }
    case 'run': {
      const [id] = args(1, 'a workflow id') as [string];
      return runOnce(client(values, io), id, values, io);
    }
    case 'chat': {
      const [id] = args(1, 'a workflow id') as [string];
      return chat(client(values, io), id, values['run-id'] ? { runId: values['run-id'] } : {}, io);
    }
    case 'replay': {
      const [id] = args(1, 'a workflow id') as [string];
      return replay(client(values, io), id, replayOptions(values), io);
    }
    case 'keys create': {
      args(0, 'no argument (use --name, --scope, --workflows)');
      const workflowIds = (values.workflows ?? '').split(',').map((s) => s.trim()).filter(Boolean);
      const scope = values.scope ?? (workflowIds.length > 0 ? 'execute' : 'admin');
      if (scope !== 'admin' && scope !== 'execute') throw usage(`--scope must be admin or execute, got "${scope}"`);
      if (scope === 'execute' && workflowIds.length === 0) throw usage('an execute key needs --workflows id1,id2');
      if (scope === 'admin' && workflowIds.length > 0) throw usage('--workflows goes with --scope execute (an admin key may use every workflow)');
      const keyName = values.name ?? `${scope} key created ${new Date().toISOString().slice(0, 16).replace('T', ' ')}`;
      const key = await client(values, io).json<{ id: string; name: string; scope: string; workflow_ids: string[]; key: string }>('POST', '/workflows/v1/keys', { name: keyName, scope, workflow_ids: workflowIds });
      if (values.json) return json(io, key);
      info(`Created ${key.scope} key ${key.id} "${key.name}"${key.workflow_ids.length ? ` for ${key.workflow_ids.join(', ')}` : ''}; its secret is shown this once:`);
      out(key.key);
      return 0;
    }
    case 'keys list': {
      args(0, 'no argument');
      const { items } = await client(values, io).json<{ items: { id: string; name: string; scope: string; workflow_ids: string[]; created_at: string; revoked_at: string | null }[] }>('GET', '/workflows/v1/keys');
      if (values.json) return json(io, { items });
      if (items.length === 0) info('No keys.');
      const rows = [...items].sort((a, b) => a.created_at.localeCompare(b.created_at)).map((k) => [k.id, k.scope, k.revoked_at ? 'revoked' : 'active', k.created_at, k.name, k.workflow_ids.join(',')]);
      if (rows.length) for (const row of table([['ID', 'SCOPE', 'STATUS', 'CREATED', 'NAME', 'WORKFLOWS'], ...rows])) out(row);
      return 0;
    }
    case 'keys revoke': {
      const [id] = args(1, 'a key id') as [string];
      if (!/^[0-9a-f]{16}$/.test(id)) throw usage(`"${id}" is not a key id (16 hex characters; "npx easel keys list" shows them)`);
      await client(values, io).json('DELETE', `/workflows/v1/keys/${id}`, undefined, `key "${id}"`);
      out(`Revoked ${id} (servers that cached it may accept it for up to 30 s more).`);
      return 0;
    }
    default:
      throw usage(`unknown command "${name}"`);
  }
}

/** `replay`'s options, checked before anything is sent. */
function replayOptions(values: Values): ReplayOptions {
  if (values.version === undefined || !/^[1-9]\d*$/.test(values.version)) throw usage('replay needs --version <n>, a version number of the workflow');
  if ((values.runs === undefined) === (values.sample === undefined)) throw usage('replay takes either --runs <id1,id2> or --sample <n>');
  if (values.since !== undefined && values.sample === undefined) throw usage('--since goes with --sample');
  const options: ReplayOptions = { version: Number(values.version), ...(values.refuse ? { refuse: true } : {}), ...(values.json ? { json: true } : {}) };
  if (values.runs !== undefined) {
    const runs = values.runs.split(',').map((r) => r.trim()).filter(Boolean);
    const bad = runs.find((r) => !/^[0-9a-f]{32}$/.test(r));
    if (runs.length === 0 || bad !== undefined) throw usage(`--runs takes run ids (32 hex characters) separated by commas${bad ? `; "${bad}" is not one` : ''}`);
    return { ...options, runs };
  }
  if (!/^[1-9]\d*$/.test(values.sample as string)) throw usage(`--sample must be a number of runs, got "${values.sample}"`);
  if (values.since !== undefined && Number.isNaN(Date.parse(values.since))) throw usage(`--since must be an ISO time (e.g. 2026-01-31T00:00:00Z), got "${values.since}"`);
  return { ...options, sample: Number(values.sample), ...(values.since !== undefined ? { since: new Date(values.since).toISOString() } : {}) };
}

function json(io: Io, value: unknown): number {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  return 0;
}

function client(values: Values, io: Io): EaselClient {
  let config;
  try {
    config = readCliConfig({
      ...io.env,
      ...(values['base-url'] !== undefined ? { EASEL_BASE_URL: values['base-url'] } : {}),
      ...(values.key !== undefined ? { EASEL_API_KEY: values.key } : {}),
    });
  } catch (error) {
    if (error instanceof ConfigError) throw new CliError(error.problems.join('; ').replace('EASEL_BASE_URL', '--base-url / EASEL_BASE_URL'), 2);
    throw error;
  }
  if (!config.apiKey) throw new CliError('no API key: pass --key or set EASEL_API_KEY (npm start prints one)', 2);
  return new EaselClient(config.baseUrl, config.apiKey);
}

/** A workflow file: a bare RAGFlow DSL, or `{name, description, dsl}` as in examples/. */
async function workflowFile(file: string, values: Values, io: Io): Promise<{ name: string; description?: string; canvas_type?: string; canvas_category?: string; dsl: unknown }> {
  let text: string;
  try {
    text = file === '-' ? await readStream(io.stdin) : await readFile(file, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, 2);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new CliError(`${file === '-' ? 'stdin' : file} is not JSON: ${(error as Error).message}`, 2);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new CliError(`${file} is not a JSON object`, 2);
  const record = doc as Record<string, unknown>;
  const wrapped = isTemplateFile(record);
  // {name, description, dsl} or RAGFlow's template file ({title: {en, ...}, canvas_type, dsl})
  const template = wrapped ? templateFields(record) : {};
  const fileName = wrapped && typeof record.name === 'string' ? record.name : template.title;
  const name = values.name ?? fileName ?? (file === '-' ? undefined : basename(file).replace(/\.json$/i, ''));
  if (!name) throw usage('give the workflow a --name (the DSL on stdin carries none)');
  const description = values.description ?? template.description;
  return {
    name,
    ...(description ? { description } : {}),
    ...(template.canvasType !== undefined ? { canvas_type: template.canvasType } : {}),
    ...(template.canvasCategory !== undefined ? { canvas_category: template.canvasCategory } : {}),
    dsl: wrapped ? record.dsl : record,
  };
}

async function readStream(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8');
}

/** `easel run`: one turn, messages streamed to stdout, the outcome (and how to go on) to stderr. */
async function runOnce(api: EaselClient, workflowId: string, values: Values, io: Io): Promise<number> {
  let inputs: Record<string, unknown> | undefined;
  if (values.inputs !== undefined) {
    try {
      inputs = JSON.parse(values.inputs) as Record<string, unknown>;
    } catch (error) {
      throw usage(`--inputs is not JSON: ${(error as Error).message}`);
    }
    if (typeof inputs !== 'object' || inputs === null || Array.isArray(inputs)) throw usage('--inputs must be a JSON object, e.g. {"name": "Ada"}');
  }
  let turn: number | undefined;
  if (values.turn !== undefined) {
    if (!/^\d+$/.test(values.turn)) throw usage(`--turn must be a turn number, got "${values.turn}"`);
    if (!values['run-id']) throw usage('--turn goes with --run-id');
    turn = Number(values.turn);
  }
  const runId = values['run-id'];
  if (runId !== undefined && !/^[0-9a-f]{32}$/.test(runId)) throw usage(`"${runId}" is not a run id (32 hex characters)`);
  const body: ExecuteBody = {
    ...(runId ? { run_id: runId } : {}),
    ...(turn !== undefined ? { turn_number: turn } : {}),
    run_input: { ...(values.query !== undefined ? { query: values.query } : {}), ...(inputs ? { inputs } : {}) },
  };
  let result: RunState;
  if (values.json) {
    result = values.async ? await api.asyncTurn(workflowId, body, () => undefined) : await api.turn(workflowId, body, () => undefined);
    json(io, result);
  } else {
    result = await printedTurn(api, workflowId, body, io.stdout, io.stderr, '', values.async ? 'async' : 'stream');
    io.stderr.write(`run ${result.run_id} · turn ${result.turn_number} · ${result.status}\n`);
    const hint = result.next_input_hint;
    if (result.status === 'waiting_for_input' && hint) {
      const fields = Object.entries(hint.inputs);
      io.stderr.write(`${hint.tips ? `The workflow asks: ${hint.tips}\n` : 'The workflow asks:\n'}`);
      for (const line of table(fields.map(([key, f]) => [`  ${key}`, f.name, `${f.type}${f.type === 'options' ? `: ${(f.options ?? []).join(' | ')}` : ''}${f.optional ? ' (optional)' : ''}`]))) io.stderr.write(`${line}\n`);
      const example = Object.fromEntries(fields.filter(([, f]) => !f.optional).map(([key, f]) => [key, exampleValue(f.type, f.options)]));
      io.stderr.write(`Answer with: npx easel run ${workflowId} --run-id ${result.run_id} --turn ${result.turn_number} --inputs '${JSON.stringify(example)}'\n`);
    }
  }
  return result.status === 'failed' || result.status === 'aborted_looping_risk' ? 1 : 0;
}

function exampleValue(type: string, options?: string[]): unknown {
  switch (type) {
    case 'integer':
    case 'float':
    case 'number':
      return 0;
    case 'boolean':
      return true;
    case 'options':
      return options?.[0] ?? '';
    case 'object':
      return {};
    case 'file':
      return 'file_...';
    default:
      return '...';
  }
}
