/**
 * The `easel` command as users start it (node bin/easel.js, which loads lib/cli/main.ts
 * through tsx) against the app served on 127.0.0.1: `chat` driven through piped stdin to a
 * finished run (each form field prompted and answered, a wrong answer asked again, a file
 * uploaded from a path, a decision by label or number), `run` for a pause and its answer (and
 * text sent to a waiting run, said to be unused), `workflows list`, `workflows create`
 * from a RAGFlow template file, and the errors a user meets (server down, bad key, unknown
 * workflow, a stale turn, usage).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { processBatch } from '../../lib/turns/queue';
import { fixture } from '../helpers/canvas';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

const BIN = fileURLToPath(new URL('../../bin/easel.js', import.meta.url));
const ALL_FIELDS = JSON.parse(readFileSync(new URL('../playground/all-fields.json', import.meta.url), 'utf8')) as unknown;

let api: Served;
beforeAll(async () => {
  api = await serveApp(testEngine());
});
afterAll(async () => {
  await api.close();
});

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `easel <args>` with `input` piped to stdin; the server and key come from the environment. */
function easel(args: string[], input = '', env: Record<string, string> = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, EASEL_BASE_URL: api.url, EASEL_API_KEY: api.adminKey, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

/** A port nothing listens on (a server's, closed again). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function createWorkflow(name: string, dsl: unknown): Promise<string> {
  const res = await api.call('POST', '/workflows/v1/workflows', { body: { name, dsl } });
  expect(res.status).toBe(201);
  return res.json.id as string;
}

describe('easel chat', () => {
  it('asks each form field through stdin and streams the answer to a finished run', async () => {
    const wf = await createWorkflow('Form intake', fixture('form-intake'));
    const answers = ['I would like to sign up', 'Ada', 'thirty-six', '36', '3', 'pro', '', '{"city": "London"}'];
    const { code, stdout, stderr } = await easel(['chat', wf], `${answers.join('\n')}\n`);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const expected = [
      `Chatting with "Form intake" (${wf}) at ${api.url}.`,
      'you> I would like to sign up',
      'Tell us about yourself (you said: I would like to sign up)',
      'Full name: Ada',
      'Age (integer): thirty-six',
      '  expected an integer',
      'Age (integer): 36',
      'Plan:\n  1) free\n  2) pro\nPlan [1-2]: 3',
      '  choose a number from 1 to 2',
      'Plan [1-2]: pro',
      'Newsletter (optional) [y/n]: \n',
      'Profile (optional) (JSON): {"city": "London"}',
      'assistant> Welcome Ada (36), plan pro; city London.\n',
      '· turn 2: completed',
      'you> \nBye. Run ',
    ];
    let at = 0;
    for (const piece of expected) {
      const found = stdout.indexOf(piece, at);
      expect(found, `${JSON.stringify(piece)} after offset ${at} in:\n${stdout}`).toBeGreaterThanOrEqual(0);
      at = found + piece.length;
    }
    // not a TTY: no spinner, no terminal escapes
    expect(stdout).not.toContain('\x1b[');
    const runId = /\(run ([0-9a-f]{32})\)/.exec(stdout)?.[1];
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(run.json).toMatchObject({ status: 'completed', turn_number: 2 });
  });

  it('uploads a file given as a path, and ends cleanly when the input ends inside a form', async () => {
    const wf = await createWorkflow('All fields', ALL_FIELDS);
    const dir = mkdtempSync(join(tmpdir(), 'easel-cli-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'lamp.txt');
    writeFileSync(path, 'flicker flicker');
    const answers = ['report', 'Broken lamp', 'It flickers.', '2', '3', '0.25', '', 'y', '{"tag": "lights"}', join(dir, 'missing.txt'), path, ''];
    const done = await easel(['chat', wf], `${answers.join('\n')}\n`);
    expect(done.stderr).toBe('');
    expect(done.code).toBe(0);
    expect(done.stdout).toContain('Document (file path): ');
    expect(done.stdout).toMatch(/cannot read .*missing\.txt: ENOENT/);
    expect(done.stdout).toMatch(/uploaded .*lamp\.txt as file_[0-9a-f]{32}/);
    expect(done.stdout).toContain('assistant> Filed Broken lamp: It flickers. / size large / count 3 / ratio 0.25 / urgent true / tag lights / doc {"file_id":"file_');

    // a command typed at a form: /stop ends the run
    const stopped = await easel(['chat', wf], 'report\nBroken lamp\n/stop\n');
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toContain('Summary: /stop\nthe run was cancelled\n· turn 2: cancelled\nThe run has finished (cancelled).\n');

    // Ctrl-D at a form: nothing sent, a clean end with the way back
    const cut = await easel(['chat', wf], 'report\nBroken lamp\n');
    expect(cut.code).toBe(0);
    expect(cut.stderr).toBe('');
    expect(cut.stdout).toMatch(/The form was not sent; run [0-9a-f]{32} waits at turn 1\. Continue with: npx easel chat wf_\w+ --run-id [0-9a-f]{32}\n$/);
  });

  it('has nothing to stop on a finished pass: it says so and the run stays as it is', async () => {
    const wf = await createWorkflow('Greeter', { components: { begin: { obj: { component_name: 'Begin', params: { mode: 'conversational' } }, downstream: ['Message:Hi'], upstream: [] }, 'Message:Hi': { obj: { component_name: 'Message', params: { content: ['hi there'] } }, downstream: [], upstream: ['begin'] } }, globals: {}, variables: {} });
    const done = await easel(['chat', wf], 'hello\n/stop\n/quit\n');
    expect(done.code).toBe(0);
    expect(done.stdout).toMatch(/Nothing to stop: run [0-9a-f]{32} is completed\. \/new starts a new run, \/quit ends\.\n/);
    expect(done.stdout).toMatch(/Bye\. Run [0-9a-f]{32} is at turn 1 \(completed\)\./);
  });
  it('takes a decision by its label or its number, and an option by its name, through stdin', async () => {
    const wf = await createWorkflow('Review', {
      components: {
        begin: { obj: { component_name: 'Begin', params: { mode: 'conversational' } }, downstream: ['UserFillUp:Review'], upstream: [] },
        'UserFillUp:Review': {
          obj: { component_name: 'UserFillUp', params: { tips: 'Refund this order?', inputs: { speed: { name: 'Speed', type: 'options', options: ['slow', 'fast'], optional: false } }, decisions: [{ id: 'approve', label: 'Approve refund', to: 'Message:Yes' }, { id: 'reject', label: 'Reject', to: 'Message:No' }] } },
          downstream: ['Message:Yes', 'Message:No'],
          upstream: ['begin'],
        },
        'Message:Yes': { obj: { component_name: 'Message', params: { content: ['Refunded ({UserFillUp:Review@speed}).'] } }, downstream: [], upstream: ['UserFillUp:Review'] },
        'Message:No': { obj: { component_name: 'Message', params: { content: ['Refused ({UserFillUp:Review@decision_label}).'] } }, downstream: [], upstream: ['UserFillUp:Review'] },
      },
      globals: {},
      variables: {},
    });
    const byLabel = await easel(['chat', wf], 'order 42\nFAST\napprove REFUND\n/quit\n');
    expect(byLabel.code, byLabel.stderr).toBe(0);
    expect(byLabel.stdout).toContain('Decision:\n  1) Approve refund\n  2) Reject\n');
    expect(byLabel.stdout).toContain('assistant> Refunded (fast).\n');
    const byNumber = await easel(['chat', wf], 'order 43\n1\n2\n/quit\n');
    expect(byNumber.code, byNumber.stderr).toBe(0);
    expect(byNumber.stdout).toContain('assistant> Refused (Reject).\n');
  });
});

describe('easel run and workflows list', () => {
  it('runs one turn to a pause, answers it, and lists the workflows', async () => {
    const wf = await createWorkflow('Form intake', fixture('form-intake'));
    const first = await easel(['run', wf, '--query', 'hello']);
    expect(first.code).toBe(0);
    expect(first.stdout).toBe('');
    expect(first.stderr).toMatch(/^run [0-9a-f]{32} · turn 1 · waiting_for_input\nThe workflow asks: Tell us about yourself \(you said: hello\)\n/);
    expect(first.stderr).toMatch(/plan +Plan +options: free \| pro/);
    expect(first.stderr).toMatch(/newsletter +Newsletter +boolean \(optional\)/);
    const runId = /^run ([0-9a-f]{32})/.exec(first.stderr)?.[1] as string;
    expect(first.stderr).toContain(`Answer with: npx easel run ${wf} --run-id ${runId} --turn 1 --inputs '{"name":"...","age":0,"plan":"free"}'`);

    const second = await easel(['run', wf, '--run-id', runId, '--turn', '1', '--inputs', '{"name": "Ada", "age": 36, "plan": "free"}']);
    expect(second.stdout).toBe('Welcome Ada (36), plan free; city .\n');
    expect(second.stderr).toBe(`run ${runId} · turn 2 · completed\n`);
    expect(second.code).toBe(0);

    const list = await easel(['workflows', 'list']);
    expect(list.code).toBe(0);
    const lines = list.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID +UPDATED +NAME$/);
    expect(lines.some((l) => l.startsWith(wf) && l.endsWith('Form intake'))).toBe(true);
  });

  it('says text sent to a run waiting for its form was not used, and how to answer the form', async () => {
    const wf = await createWorkflow('Form intake', fixture('form-intake'));
    const first = await easel(['run', wf, '--query', 'hello']);
    const runId = /^run ([0-9a-f]{32})/.exec(first.stderr)?.[1] as string;
    const text = await easel(['run', wf, '--run-id', runId, '--turn', '1', '--query', 'which plan is cheaper?']);
    expect(text.code).toBe(0);
    expect(text.stdout).toBe('');
    expect(text.stderr).toMatch(new RegExp(`^· not used: the run waits for its form, and your text answers none of its fields \\(it was recorded\\); the form is asked again\nrun ${runId} · turn 2 · waiting_for_input\nThe workflow asks: `));
    expect(text.stderr).toContain(`Answer with: npx easel run ${wf} --run-id ${runId} --turn 2 --inputs '{"name":"...","age":0,"plan":"free"}'`);
    // --json: the API's notice as it is
    const json = await easel(['run', wf, '--run-id', runId, '--turn', '2', '--query', 'hello?', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ turn_number: 3, notice: { code: 'query_not_used' } });
    // text with the answers: used, nothing to say
    const answered = await easel(['run', wf, '--run-id', runId, '--turn', '3', '--query', 'here', '--inputs', '{"name": "Ada", "age": 36, "plan": "free"}']);
    expect(answered.stderr).toBe(`run ${runId} · turn 4 · completed\n`);
  });

  it('creates a workflow from a RAGFlow template file as it ships, with its English title', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-template-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'feedback.json');
    writeFileSync(file, JSON.stringify({ id: 11, title: { en: 'Feedback dispatcher', zh: '客户反馈' }, description: { en: 'Routes feedback.' }, canvas_type: 'Customer Support', dsl: fixture('form-intake') }));
    const created = await easel(['workflows', 'create', file]);
    expect(created.code).toBe(0);
    expect(created.stderr).toMatch(/^Created workflow wf_[0-9a-f]{16} "Feedback dispatcher" \(version 1\)\.\n$/);
    const shown = await api.call('GET', `/workflows/v1/workflows/${created.stdout.trim()}`);
    expect(shown.json).toMatchObject({ name: 'Feedback dispatcher', description: 'Routes feedback.', canvas_type: 'Customer Support', canvas_category: 'agent_canvas' });
    // --name still wins
    expect(JSON.parse((await easel(['workflows', 'create', file, '--name', 'Mine', '--json'])).stdout)).toMatchObject({ name: 'Mine', canvas_type: 'Customer Support' });
  });

  it('workflows create --drop-unsupported-tools imports a file with tools Easel does not offer, naming each one dropped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-cli-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'search.json');
    const agent = {
      llm_id: 'echo', sys_prompt: 'You search.', prompts: [{ role: 'user', content: '{sys.query}' }],
      tools: [{ component_name: 'DuckDuckGo', name: 'DuckDuckGo', params: {} }, { component_name: 'Wikipedia', name: 'Wikipedia', params: {} }],
    };
    writeFileSync(file, JSON.stringify({ name: 'search', dsl: { components: {
      begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['Agent:S'], upstream: [] },
      'Agent:S': { obj: { component_name: 'Agent', params: agent }, downstream: [], upstream: ['begin'] },
    } } }));
    const refused = await easel(['workflows', 'create', file]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('DuckDuckGo: DuckDuckGo offers no public web-search API to call');
    const created = await easel(['workflows', 'create', file, '--drop-unsupported-tools']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toContain('! Agent:S: the tool DuckDuckGo ("DuckDuckGo") was left out: DuckDuckGo offers no public web-search API to call.');
    const versions = await api.call('GET', `/workflows/v1/workflows/${created.stdout.trim()}`);
    expect(versions.json.name).toBe('search');
  });

  it('runs turns in the server worker with --async and follows them to their end', async () => {
    // a server whose async turns go through an in-process queue to the worker's handler
    const engine = testEngine();
    const queue = createInProcessQueue((records) => processBatch({ engine, guard: new SsrfGuard() }, records));
    const withWorker = await serveApp(engine, { enqueue: queue.enqueue });
    try {
      const env = { EASEL_BASE_URL: withWorker.url, EASEL_API_KEY: withWorker.adminKey };
      const created = await withWorker.call('POST', '/workflows/v1/workflows', { body: { name: 'Form intake', dsl: fixture('form-intake') } });
      const wf = created.json.id as string;
      const first = await easel(['run', wf, '--query', 'hello', '--async'], '', env);
      expect(first.code, first.stderr).toBe(0);
      expect(first.stderr).toMatch(/^· turn 1 is running in the server's worker \(run ([0-9a-f]{32})\); following it\nrun \1 · turn 1 · waiting_for_input\n/);
      const runId = /\(run ([0-9a-f]{32})\)/.exec(first.stderr)?.[1] as string;

      const second = await easel(['run', wf, '--run-id', runId, '--turn', '1', '--inputs', '{"name": "Ada", "age": 36, "plan": "free"}', '--async'], '', env);
      expect(second.stdout).toBe('Welcome Ada (36), plan free; city .\n');
      expect(second.stderr).toBe(`· turn 2 is running in the server's worker (run ${runId}); following it\nrun ${runId} · turn 2 · completed\n`);
      const json = await easel(['run', wf, '--query', 'again', '--async', '--json'], '', env);
      expect(JSON.parse(json.stdout)).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    } finally {
      await queue.idle();
      await withWorker.close();
    }
  });

  it('says clearly what went wrong: stale turn, unknown workflow, bad key, server down, usage', async () => {
    const wf = await createWorkflow('Form intake', fixture('form-intake'));
    const first = await easel(['run', wf, '--json', '--query', 'hi']);
    const runId = (JSON.parse(first.stdout) as { run_id: string }).run_id;
    await easel(['run', wf, '--run-id', runId, '--inputs', '{"name": "Ada", "age": 1, "plan": "free"}']);

    const closed = await freePort();
    const [stale, missing, badKey, down, usage, noKey] = await Promise.all([
      easel(['run', wf, '--run-id', runId, '--turn', '1', '--inputs', '{"name": "Bob"}']),
      easel(['run', 'wf_nope', '--query', 'x']),
      easel(['workflows', 'list', '--key', 'not-a-valid-key-0123456789']),
      easel(['workflows', 'list', '--base-url', `http://127.0.0.1:${closed}`]),
      easel(['workflows', 'activate', wf]),
      easel(['keys', 'list'], '', { EASEL_API_KEY: '' }),
    ]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/^easel: this turn was already answered: the run is at turn 2 \(completed\) \(409 turn_conflict: .*\)\n$/);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^easel: workflow "wf_nope": not found \(404 not_found: .*\); it does not exist, or this key may not use it\n$/);
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toMatch(/^easel: the server refused the API key \(401 unauthorized: .*\); check --key or EASEL_API_KEY\n$/);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^easel: cannot reach the Easel server at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\): is it running\? \(--base-url or EASEL_BASE_URL names it\)\n$/);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('"workflows activate" takes a workflow id and a version number');
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toBe('easel: no API key: pass --key or set EASEL_API_KEY (npm start prints one)\n');

    const execute = await api.addKey(api.tenant, 'execute', [wf]);
    const forbidden = await easel(['keys', 'list', '--key', execute]);
    expect(forbidden.code).toBe(1);
    expect(forbidden.stderr).toMatch(/^easel: this key may not do that \(403 forbidden: .*\); workflows and keys are managed with an admin key\n$/);
  });
});
