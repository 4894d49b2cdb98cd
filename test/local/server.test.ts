/**
 * `npm start` end to end: the real entry point (`npm start`'s command) in a child process,
 * first on its own DynamoDB Local (--in-memory), then twice on the test DynamoDB with one table
 * to show a restart duplicates nothing; the examples over HTTP; the keys CLI; SIGINT. A stop
 * with turns in flight is shutdown.test.ts. The tests wait for what the server prints or logs.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileWorkflow } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { modelBanner } from '../../lib/local/model-banner';
import { findApiKey } from '../../lib/store/api-keys';
import { createDynamoClients, ensureTable } from '../../lib/store/setup';
import { getWorkflow } from '../../lib/store/workflows';
import {
  apiKeyProblem,
  EXAMPLES_DIR,
  LOCAL_TENANT,
  loadExamples,
  localKeyId,
  readExamples,
  registerLocalKey,
  REPO_ROOT,
} from '../../lib/local/bootstrap';
import { revokeApiKey } from '../../lib/store/api-keys';
import { testTable } from '../helpers/dynamo';
import { api as call, childEnv, freePort, portFree, type Running, spawnServer, startServer as start, stopLeftovers, stopServer, TSX } from './npm-start';

const ADMIN_KEY = `local-test-key-${Math.random().toString(36).slice(2)}`;
const EXAMPLE_IDS = ['ex-callback', 'ex-form-intake', 'ex-loop-survey', 'ex-support-triage'];

afterAll(async () => {
  // a failed test must not leave a server (or its DynamoDB Local) behind
  await stopLeftovers();
});

const startServer = (env: Record<string, string>, args: string[] = []) => start(ADMIN_KEY, env, args);
const api = async (url: string, key: string, method: string, path: string, body?: unknown) => {
  const { status, json } = await call(url, key, method, path, body);
  return { status, json };
};

/** The text of the turn's messages (deltas are merged in the JSON response). */
function messages(turn: { events: { event: string; data: { content?: string } }[] }): string {
  return turn.events.filter((e) => e.event === 'message').map((e) => e.data.content).join('\n');
}

async function keysCli(url: string, key: string | undefined, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(TSX, ['lib/local/keys-cli.ts', ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ EASEL_BASE_URL: url, ...(key === undefined ? {} : { EASEL_API_KEY: key }) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

describe('the model line of the banner', () => {
  it('names the configured model, and says echo is a stand-in and how to configure a real one', () => {
    expect(modelBanner({ defaultModel: 'openai:gpt-4o-mini', models: {} })).toBe('Model: openai:gpt-4o-mini for every llm_id not mapped');
    expect(modelBanner({ defaultModel: 'bedrock:anthropic.claude-3-haiku', models: { 'a@B': 'openai:x', 'c@D': 'openai:y' } })).toBe('Model: bedrock:anthropic.claude-3-haiku for every llm_id not mapped; 2 llm_ids mapped by EASEL_LLM_MODELS');
    expect(modelBanner({ defaultModel: 'echo', models: { 'a@B': 'openai:x' } })).toMatch(/^Model: echo for every llm_id not mapped; 1 llm_id mapped by EASEL_LLM_MODELS\. echo is a stand-in, not a language model/);
  });
});

describe('examples', () => {
  it('are valid workflows with their stable ids', async () => {
    const examples = await readExamples();
    expect(examples.map((e) => e.id)).toEqual(EXAMPLE_IDS);
    for (const e of examples) {
      expect(() => compileWorkflow(e.dsl, builtinComponents), e.id).not.toThrow();
      expect(e.name).not.toBe('');
      expect(e.description).not.toBe('');
    }
    const raw = JSON.parse(await readFile(join(EXAMPLES_DIR, 'loop-survey.json'), 'utf8'));
    expect(raw.dsl.components['Loop:Survey'].obj.params.maximum_loop_count).toBe(3);
  });
});

describe('npm start on its own DynamoDB Local (--in-memory)', () => {
  let server: Running;
  let dynamoPort: number;

  beforeAll(async () => {
    server = await startServer({ EASEL_PUMP_INTERVAL_MS: '250' }, ['--in-memory']);
  }, 180_000);

  it('prints the URL, where the data is, the key, the example ids and a curl line', () => {
    const out = server.stdout();
    expect(out).toContain(`Easel is listening on ${server.url}`);
    const db = /DynamoDB: DynamoDB Local at http:\/\/127\.0\.0\.1:(\d+) \(in memory: nothing is kept\), table easel-local/.exec(out);
    expect(db, out).not.toBeNull();
    dynamoPort = Number(db?.[1]);
    expect(out).toContain(`API key: the value of EASEL_API_KEY (admin, tenant local, id ${localKeyId(ADMIN_KEY)})`);
    expect(out).not.toContain(ADMIN_KEY); // a key the user chose is not echoed
    // no model configured: the banner says echo answers, that it is a stand-in, and how to set a real one
    expect(out).toContain('Model: echo for every llm_id not mapped. echo is a stand-in, not a language model');
    expect(out).toContain('set EASEL_LLM_BASE_URL and EASEL_LLM_DEFAULT_MODEL');
    expect(out).toContain('Examples: ex-callback (created), ex-form-intake (created), ex-loop-survey (created), ex-support-triage (created)');
    expect(out).toMatch(new RegExp(`Try: curl -s -X POST ${server.url}/workflows/v1/workflows/ex-support-triage/execute -H "Authorization: Bearer \\$EASEL_API_KEY"`));
  });

  it('runs the form intake: a pause, an empty answer pauses again, the answers complete it', async () => {
    const path = '/workflows/v1/workflows/ex-form-intake/execute';
    const t1 = await api(server.url, ADMIN_KEY, 'POST', path, { run_input: { query: 'I want to sign up' } });
    expect(t1.status).toBe(200);
    expect(t1.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, is_waiting_for_input: true });
    expect(Object.keys(t1.json.next_input_hint.inputs)).toEqual(['name', 'email', 'plan', 'newsletter', 'notes']);
    expect(t1.json.next_input_hint.inputs.plan.options).toEqual(['free', 'pro']);
    const runId = t1.json.run_id as string;
    const t2 = await api(server.url, ADMIN_KEY, 'POST', path, { run_id: runId, turn_number: 1, run_input: { inputs: {} } });
    expect(t2.json).toMatchObject({ status: 'waiting_for_input', turn_number: 2 });
    const inputs = { name: 'Ada Lovelace', email: 'ada@example.com', plan: 'pro', newsletter: true, notes: 'Call me after 5pm' };
    const t3 = await api(server.url, ADMIN_KEY, 'POST', path, { run_id: runId, turn_number: 2, run_input: { inputs } });
    expect(t3.json).toMatchObject({ status: 'completed', turn_number: 3, next_input_hint: null });
    const text = messages(t3.json);
    for (const value of ['Ada Lovelace', 'ada@example.com', 'pro', 'true', 'Call me after 5pm']) expect(text).toContain(value);
    const run = await api(server.url, ADMIN_KEY, 'GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(run.json).toMatchObject({ run_id: runId, status: 'completed', turn_number: 3 });
  });

  it('routes the triage by category, streaming over SSE', async () => {
    const response = await fetch(`${server.url}/workflows/v1/workflows/ex-support-triage/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ run_input: { query: 'I have a billing question about my invoice' } }),
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const body = await response.text();
    expect(body).toContain('event: message\n');
    const last = /event: turn_response\ndata: (.*)\n/.exec(body);
    expect(last, body).not.toBeNull();
    const t1 = JSON.parse(last?.[1] ?? '{}');
    expect(t1).toMatchObject({ status: 'completed', turn_number: 1 });
    expect(messages(t1)).toMatch(/^\[billing\]/);
    // conversational: the next query starts another pass of the same run
    const t2 = await api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/workflows/ex-support-triage/execute', {
      run_id: t1.run_id,
      run_input: { query: 'my shipping is late, where is the parcel?' },
    });
    expect(t2.json).toMatchObject({ status: 'completed', turn_number: 2 });
    expect(messages(t2.json)).toMatch(/^\[shipping\]/);
    const t3 = await api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/workflows/ex-support-triage/execute', { run_input: { query: 'do you sell gift cards?' } });
    expect(messages(t3.json)).toMatch(/^\[other\]/);
  });

  it('runs the loop survey: three answers, then the listing', async () => {
    const path = '/workflows/v1/workflows/ex-loop-survey/execute';
    let turn = await api(server.url, ADMIN_KEY, 'POST', path, {});
    expect(turn.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    expect(Object.keys(turn.json.next_input_hint.inputs)).toEqual(['idea']);
    const runId = turn.json.run_id as string;
    const ideas = ['faster checkout', 'dark mode', 'more examples'];
    for (const [i, idea] of ideas.entries()) {
      turn = await api(server.url, ADMIN_KEY, 'POST', path, { run_id: runId, turn_number: i + 1, run_input: { inputs: { idea } } });
      expect(turn.json.status).toBe(i < 2 ? 'waiting_for_input' : 'completed');
    }
    expect(turn.json.is_terminal).toBe(true);
    expect(messages(turn.json)).toBe(`Thank you! Your three ideas: ${JSON.stringify(ideas)}`);
  });

  it('fires a form timer through the in-process pump: the run takes the timeout branch', async () => {
    const example = JSON.parse(await readFile(join(EXAMPLES_DIR, 'callback-request.json'), 'utf8'));
    example.dsl.components['UserFillUp:Phone'].obj.params.timeout_seconds = 1; // the example waits 30 s
    const created = await api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/workflows', { name: 'quick callback', dsl: example.dsl });
    expect(created.status).toBe(201);
    const t1 = await api(server.url, ADMIN_KEY, 'POST', `/workflows/v1/workflows/${created.json.id}/execute`, { run_input: { query: 'call me' } });
    expect(t1.json).toMatchObject({ status: 'waiting_for_input', has_background_work: true });
    // the server logs a pump that fired a timer once its turn has committed (this is the only
    // run with a timer here); the timer is due a second after the pause
    await server.logged(/^\[easel\] timers pumped \{"fired":1,/);
    const run = (await api(server.url, ADMIN_KEY, 'GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`)).json;
    expect(run).toMatchObject({ status: 'completed', turn_number: 2, has_background_work: false });
    const t2 = await api(server.url, ADMIN_KEY, 'GET', `/workflows/v1/workflow-runs/${t1.json.run_id}/turns/2`);
    expect(messages(t2.json.response)).toBe('No number came within 30 seconds: we will write to you instead.');
  });

  it('runs an async turn in the in-process worker and streams it to a follower', async () => {
    const accepted = await fetch(`${server.url}/workflows/v1/workflows/ex-support-triage/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json', prefer: 'respond-async' },
      body: JSON.stringify({ run_input: { query: 'a billing question' } }),
    });
    expect(accepted.status).toBe(202);
    const { run_id: runId, turn_number: turn } = (await accepted.json()) as { run_id: string; turn_number: number };
    const followed = await fetch(`${server.url}/workflows/v1/workflow-runs/${runId}/turns/${turn}/events?format=sse`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    const body = await followed.text();
    const last = /event: turn_response\ndata: (.*)\n/.exec(body);
    expect(last, body).not.toBeNull();
    expect(JSON.parse(last?.[1] ?? '{}')).toMatchObject({ run_id: runId, status: 'completed', turn_number: 1 });
    expect(body).toMatch(/^id: \S+\nevent: workflow_started\n/);
  });

  it('takes queue messages on POST /workflows/v1/local/turn-queue and runs them as SQS would deliver them', async () => {
    const triage = JSON.parse(await readFile(join(EXAMPLES_DIR, 'support-triage.json'), 'utf8'));
    const wf = (await api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/workflows', { name: 'queued triage', dsl: triage.dsl })).json.id as string;
    const queued = await api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/local/turn-queue', { workflow_id: wf, run_input: { query: 'where is my shipping?' }, idempotency_key: 'nightly:2026-11-30' });
    expect(queued).toEqual({ status: 202, json: { queued: true, run_id: expect.stringMatching(/^[0-9a-f]{32}$/) } });
    // the in-process worker logs every message it handled
    const handled = new RegExp(`^\\[easel\\] queued turn done .*"workflow_id":"${wf}"`);
    await server.logged(handled, 1);
    const runs: { items: { run_id: string; status: string }[] } = (await api(server.url, ADMIN_KEY, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`)).json;
    expect(runs.items.map((r) => r.status)).toEqual(['completed']);
    // the run the queue named
    expect(runs.items[0]?.run_id).toBe(queued.json.run_id);
    const turn = await api(server.url, ADMIN_KEY, 'GET', `/workflows/v1/workflow-runs/${runs.items[0]?.run_id}/turns/1`);
    expect(messages(turn.json.response)).toMatch(/^\[shipping\]/);
    // the same message again (a duplicate delivery): absorbed by its idempotency key
    await api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/local/turn-queue', { workflow_id: wf, run_input: { query: 'where is my shipping?' }, idempotency_key: 'nightly:2026-11-30' });
    await server.logged(handled, 2);
    expect((await api(server.url, ADMIN_KEY, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`)).json.items).toHaveLength(1);

    const refusals = await Promise.all([
      fetch(`${server.url}/workflows/v1/local/turn-queue`, { method: 'POST', body: '{}' }).then(async (r) => [r.status, ((await r.json()) as { code: string }).code]),
      api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/local/turn-queue', { workflow_id: wf, run_id: 'a'.repeat(32) }).then((r) => [r.status, r.json.code, r.json.field]),
      api(server.url, ADMIN_KEY, 'POST', '/workflows/v1/local/turn-queue', { tenant: 'someone-else', workflow_id: wf }).then((r) => [r.status, r.json.code, r.json.field]),
      api(server.url, ADMIN_KEY, 'GET', '/workflows/v1/local/turn-queue').then((r) => [r.status, r.json.code]),
    ]);
    expect(refusals).toEqual([
      [401, 'unauthorized'],
      [400, 'invalid_request', 'turn_number'],
      [400, 'invalid_request', 'tenant'],
      [404, 'not_found'],
    ]);
  });

  it('npm run keys: create, list and revoke over HTTP, with clear errors', async () => {
    const created = await keysCli(server.url, ADMIN_KEY, ['create', '--name', 'embed', '--workflows', 'ex-form-intake']);
    expect(created.code, created.stderr).toBe(0);
    const secret = created.stdout.trim();
    expect(secret).toMatch(/^ek_[A-Za-z0-9_-]{43}$/);
    const id = /Created execute key ([0-9a-f]{16}) "embed" for ex-form-intake/.exec(created.stderr)?.[1];
    expect(id, created.stderr).toBeDefined();

    // an execute key reaches its workflow only, and cannot manage keys
    expect((await api(server.url, secret, 'GET', '/workflows/v1/workflows/ex-form-intake')).status).toBe(200);
    expect((await api(server.url, secret, 'GET', '/workflows/v1/workflows/ex-loop-survey')).status).toBe(404);
    const forbidden = await keysCli(server.url, secret, ['list']);
    expect(forbidden.code).toBe(1);
    expect(forbidden.stderr).toContain('EASEL_API_KEY is not an admin key (403');

    const listed = await keysCli(server.url, ADMIN_KEY, ['list']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`${id}\\s+execute\\s+active\\s+\\S+\\s+embed\\s+ex-form-intake`));
    expect(listed.stdout).toMatch(new RegExp(`${localKeyId(ADMIN_KEY)}\\s+admin\\s+active`));
    expect(listed.stdout).not.toContain(secret);

    // a key revoked before any request used it is refused at once (a cached key: within 30 s)
    const spare = await keysCli(server.url, ADMIN_KEY, ['create', '--name', 'spare']);
    const spareId = /Created admin key ([0-9a-f]{16})/.exec(spare.stderr)?.[1] as string;
    const revoked = await keysCli(server.url, ADMIN_KEY, ['revoke', spareId]);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain(`Revoked ${spareId}`);
    expect((await api(server.url, spare.stdout.trim(), 'GET', '/workflows/v1/workflows')).status).toBe(401);
    const relisted = await keysCli(server.url, ADMIN_KEY, ['list']);
    expect(relisted.stdout).toMatch(new RegExp(`${spareId}\\s+admin\\s+revoked \\S+`));

    const unknownKey = await keysCli(server.url, 'not-a-key-of-this-server', ['list']);
    expect(unknownKey.code).toBe(1);
    expect(unknownKey.stderr).toContain('the server refused EASEL_API_KEY (401');
    const down = await keysCli(`http://127.0.0.1:${await freePort()}`, ADMIN_KEY, ['list']);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot reach the Easel server at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\): is `npm start` running\?/);
    const noKey = await keysCli(server.url, undefined, ['list']);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('set EASEL_API_KEY');
    const badScope = await keysCli(server.url, ADMIN_KEY, ['create', '--scope', 'execute']);
    expect(badScope.code).toBe(2);
    expect(badScope.stderr).toContain('an execute key needs --workflows');
  }, 90_000);

  it('stops on SIGINT: exit 0, and neither its port nor DynamoDB Local\'s stays taken', async () => {
    const port = Number(new URL(server.url).port);
    expect(await portFree(dynamoPort, '0.0.0.0')).toBe(false);
    expect(await stopServer(server, 'SIGINT')).toBe(0);
    expect(server.stdout()).toMatch(/SIGINT: stopping\.\.\.\nStopped\.\n$/);
    expect(await portFree(port, '127.0.0.1')).toBe(true);
    expect(await portFree(dynamoPort, '0.0.0.0')).toBe(true);
  }, 60_000);
});

describe('npm start on an existing DynamoDB (EASEL_DYNAMODB_ENDPOINT)', () => {
  const table = `easel-local-restart-${Date.now().toString(36)}`;

  it('creates the table and the examples once: a restart duplicates nothing', async () => {
    const env = { EASEL_DYNAMODB_ENDPOINT: testTable().endpoint, EASEL_DYNAMODB_TABLE: table };
    const list = async (s: Running) => (await api(s.url, ADMIN_KEY, 'GET', '/workflows/v1/workflows?limit=100')).json.items.map((w: { id: string }) => w.id).sort();
    const first = await startServer(env);
    expect(first.stdout()).toContain(`DynamoDB: ${testTable().endpoint} (EASEL_DYNAMODB_ENDPOINT), table ${table}`);
    expect(first.stdout()).toContain('Ctrl-C stops the server.');
    expect(await list(first)).toEqual(EXAMPLE_IDS);
    expect(await stopServer(first, 'SIGTERM')).toBe(0);

    const second = await startServer(env);
    expect(second.stdout()).toContain('Examples: ex-callback (unchanged), ex-form-intake (unchanged), ex-loop-survey (unchanged), ex-support-triage (unchanged)');
    expect(await list(second)).toEqual(EXAMPLE_IDS);
    const form = await api(second.url, ADMIN_KEY, 'GET', '/workflows/v1/workflows/ex-form-intake');
    expect(form.json).toMatchObject({ active_version: 1, latest_version: 1 });
    // the same key works across restarts; it is registered once
    const keys = (await api(second.url, ADMIN_KEY, 'GET', '/workflows/v1/keys')).json.items;
    expect(keys.map((k: { id: string }) => k.id)).toEqual([localKeyId(ADMIN_KEY)]);
    expect(await stopServer(second)).toBe(0);
  }, 120_000);

  it('refuses an EASEL_API_KEY under 16 characters, saying so', async () => {
    const s = spawnServer({ EASEL_API_KEY: 'too-short', PORT: String(await freePort()) });
    expect(await stopServer(s, null)).toBe(1);
    expect(s.stderr()).toContain('EASEL_API_KEY must be at least 16 characters long (it has 9)');
  });
});

describe('bootstrap', () => {
  const table = `easel-local-bootstrap-${Date.now().toString(36)}`;
  const store = () => ({ doc: testTable().doc, table });
  beforeAll(async () => {
    const { client } = createDynamoClients({ endpoint: testTable().endpoint });
    await ensureTable(client, table);
    client.destroy();
  });

  it('registers the local key idempotently and refuses a revoked or malformed one', async () => {
    expect(apiKeyProblem('x'.repeat(15))).toMatch(/at least 16/);
    expect(apiKeyProblem('has a blank in it!!')).toMatch(/blanks/);
    expect(apiKeyProblem('x'.repeat(16))).toBeUndefined();
    const secret = 'bootstrap-key-0123456789';
    expect(await registerLocalKey(store(), secret)).toEqual({ id: localKeyId(secret), created: true });
    expect(await registerLocalKey(store(), secret)).toEqual({ id: localKeyId(secret), created: false });
    expect(await findApiKey(store(), secret)).toMatchObject({ tenant: LOCAL_TENANT, scope: 'admin' });
    await revokeApiKey(store(), LOCAL_TENANT, localKeyId(secret));
    await expect(registerLocalKey(store(), secret)).rejects.toThrow(/revoked/);
  });

  it('loads the examples: created, unchanged, then a changed DSL becomes a new active version', async () => {
    const examples = await readExamples();
    const all = (action: string) => examples.map(() => action);
    expect((await loadExamples(store(), builtinComponents, examples)).map((e) => e.action)).toEqual(all('created'));
    // key order does not count as a change
    const reordered = examples.map((e) => ({ ...e, dsl: Object.fromEntries(Object.entries(e.dsl).reverse()) }));
    expect((await loadExamples(store(), builtinComponents, reordered)).map((e) => e.action)).toEqual(all('unchanged'));
    const changed = structuredClone(examples);
    const form = changed.find((e) => e.id === 'ex-form-intake')?.dsl.components as Record<string, { obj: { params: { content?: string[] } } }>;
    (form['Message:Confirmation'] as { obj: { params: { content?: string[] } } }).obj.params.content = ['Changed, {UserFillUp:SignUpForm@name}.'];
    expect((await loadExamples(store(), builtinComponents, changed)).map((e) => `${e.id} ${e.action}`)).toEqual(examples.map((e) => `${e.id} ${e.id === 'ex-form-intake' ? 'updated' : 'unchanged'}`));
    expect(await getWorkflow(store(), LOCAL_TENANT, 'ex-form-intake')).toMatchObject({ activeVersion: 2, latestVersion: 2 });
    // an invalid example stores nothing
    const broken = structuredClone(examples);
    (broken.find((e) => e.id === 'ex-loop-survey') as { dsl: Record<string, unknown> }).dsl = { components: {} };
    await expect(loadExamples(store(), builtinComponents, broken)).rejects.toThrow(/example ex-loop-survey is not a valid workflow/);
  });
});
