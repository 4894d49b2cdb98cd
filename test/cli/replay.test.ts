/**
 * `easel replay` as users start it (node bin/easel.js, stdio piped) against the app served on
 * 127.0.0.1 with the queue worker in the process: it starts a replay, shows its progress until
 * every run is done, then names the runs that did not behave the same and the calls that went
 * live; `--json` prints the replay and every run's result; usage errors exit 2.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { processBatch } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

const BIN = fileURLToPath(new URL('../../bin/easel.js', import.meta.url));

let model: OpenAiServer;
let api: Served;
let queue: ReturnType<typeof createInProcessQueue>;

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `answer to "${body.messages.at(-1)?.content}"` });
  const engine = testEngine({ openaiUrl: model.url });
  queue = createInProcessQueue((records) => processBatch({ engine, guard: new SsrfGuard(), requeue: (m) => queue.enqueue(m) }, records));
  api = await serveApp(engine, { enqueue: queue.enqueue });
});
afterAll(async () => {
  await queue.idle();
  await api.close();
  await model.close();
});

function easel(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, EASEL_BASE_URL: api.url, EASEL_API_KEY: api.adminKey }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end();
  });
}

const dsl = (prompt: string) => graph({
  begin: ['Begin', { mode: 'conversational' }, ['LLM:A']],
  'LLM:A': ['LLM', { llm_id: 'writer@Local', sys_prompt: '', prompts: [{ role: 'user', content: prompt }], message_history_window_size: 0 }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{LLM:A@content}'] }],
});

describe('easel replay', () => {
  let wf = '';
  const runs: string[] = [];

  beforeAll(async () => {
    wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'Replayed', dsl: dsl('Say: {sys.query}') } })).json.id;
    for (const query of ['one', 'two', 'three']) runs.push((await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query } } })).json.run_id);
    // version 2 shows the answer with "!" after it: every run's Message differs, none of its model calls
    const v2 = dsl('Say: {sys.query}');
    const components = v2.components as Record<string, { obj: { params: Record<string, unknown> } }>;
    components['LLM:A']!.obj.params.prompts = [{ role: 'user', content: 'Say: {sys.query}' }];
    components['Message:Out']!.obj.params.content = ['{LLM:A@content}!'];
    expect((await api.call('POST', `/workflows/v1/workflows/${wf}/versions`, { body: { dsl: v2, activate: false } })).status).toBe(201);
  }, 60_000);

  it('follows the replay with its progress, then names the runs that did not behave the same', async () => {
    const calls = model.calls;
    const { code, stdout, stderr } = await easel(['replay', wf, '--version', '2', '--runs', runs.join(',')]);
    expect(code).toBe(0);
    const lines = stderr.trim().split('\n');
    expect(lines[0]).toMatch(new RegExp(`^Replaying 3 runs of ${wf} against version 2 \\(replay [0-9a-f]{32}\\)\\.$`));
    // piped: one line per step of the bar, the last one full
    expect(lines.at(-1)).toBe('[##############################] 3/3 runs, 3 not the same');
    const table = stdout.trim().split('\n');
    expect(table[0]).toMatch(/^RUN\s+OUTCOME\s+WHERE\s+COMPONENTS$/);
    expect(table.slice(1, 4).map((l) => l.split(/\s{2,}/))).toEqual(runs.map((id) => [id, 'diverged', 'turn 1: Message:Out', 'Message:Out']));
    expect(table.at(-1)).toBe('3 runs: 3 diverged; calls: 3 answered from records, 0 live');
    expect(model.calls).toBe(calls);
  }, 60_000);

  it('prints the replay and every run\u2019s result with --json, and refuses what it cannot send', async () => {
    const { code, stdout } = await easel(['replay', wf, '--version', '1', '--sample', '2', '--since', '2000-01-01', '--json', '--refuse']);
    expect(code).toBe(0);
    const printed = JSON.parse(stdout);
    expect(printed).toMatchObject({ status: 'done', on_differ: 'refuse', runs_total: 2, runs_done: 2, summary: { outcomes: { same: 2 } } });
    expect(printed.results).toHaveLength(2);
    expect(printed.results.every((r: { run_id: string }) => runs.includes(r.run_id))).toBe(true);

    const usage = await easel(['replay', wf, '--runs', runs[0] as string]);
    expect([usage.code, usage.stderr.split('\n')[0]]).toEqual([2, 'easel: replay needs --version <n>, a version number of the workflow']);
    const both = await easel(['replay', wf, '--version', '2', '--runs', runs[0] as string, '--sample', '3']);
    expect([both.code, both.stderr.split('\n')[0]]).toEqual([2, 'easel: replay takes either --runs <id1,id2> or --sample <n>']);
    const unknown = await easel(['replay', wf, '--version', '7', '--runs', runs[0] as string]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('version: the workflow has no version 7');
  }, 60_000);
});
