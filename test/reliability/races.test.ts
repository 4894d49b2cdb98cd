/**
 * Races over HTTP: many clients answering one pause at once, and two clients taking turns on one
 * run with retries. Exactly one answer commits per turn; the model and the Invoke target see each
 * committed turn once; the stored history is what a serial run would produce.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { startTarget, type TargetServer } from '../helpers/target-server';
import { OpenAiServer } from '../llm/openai-server';

const CONCURRENT = Number(process.env.EASEL_STRESS) ? 300 : 100;

let api: Served;
let model: OpenAiServer;
let target: TargetServer;
let workflowId: string;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `thought about ${body.messages.at(-1)?.content}`, chunks: 3, delayMs: 5 });
  target = await startTarget();
  api = await serveApp(testEngine({ openaiUrl: model.url, allow: ['127.0.0.1'] }));
  const dsl = fixture('form-llm-invoke') as { variables: Record<string, { value: string }> };
  (dsl.variables.target as { value: string }).value = target.url;
  workflowId = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'race', dsl } })).json.id;
});
afterAll(async () => {
  await api.close();
  await model.close();
  await target.close();
});

const execute = (body: unknown) => api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body });

describe('races', () => {
  it(`lets exactly one of ${CONCURRENT} concurrent answers commit; model and Invoke called once`, async () => {
    const t1 = await execute({ run_input: { query: 'start' } });
    const runId = t1.json.run_id as string;
    const [calls, hits] = [model.calls, target.requests.length];
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: CONCURRENT }, (_, i) => execute({ run_id: runId, turn_number: 1, run_input: { inputs: { answer: `a${i}` } } })),
    );
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 409);
    const codes = new Map<string, number>();
    for (const r of refused) codes.set(r.json.code, (codes.get(r.json.code) ?? 0) + 1);
    console.log(`${CONCURRENT} concurrent answers in ${Date.now() - started} ms: ${ok.length} x 200, ${[...codes].map(([c, n]) => `${n} x ${c}`).join(', ')}; model calls ${model.calls - calls}, Invoke calls ${target.requests.length - hits}`);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(CONCURRENT - 1);
    expect([...codes.keys()].every((c) => c === 'turn_in_progress' || c === 'turn_conflict')).toBe(true);
    expect(model.calls - calls).toBe(1);
    expect(target.requests.length - hits).toBe(1);

    type Finished = { event: string; data: { component_id?: string; outputs?: { answer?: string } } };
    const winner = (ok[0]?.json.events as Finished[]).find((e) => e.event === 'node_finished' && e.data.component_id === 'UserFillUp:Ask')?.data.outputs?.answer;
    const turns = (await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`)).json.items as { turn_number: number; request: { run_input: { inputs?: { answer?: string } } } }[];
    expect(turns.map((t) => t.turn_number)).toEqual([1, 2]);
    expect(turns[1]?.request.run_input.inputs?.answer).toBe(winner);
    expect(JSON.parse(target.requests.at(-1)?.body ?? '{}').answer).toBe(winner);
  });

  it('two interleaved clients with retries end with the history of a serial replay', async () => {
    const simple = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'chat', dsl: fixture('llm-stream') } });
    const wf = simple.json.id as string;
    const run = (body: unknown) => api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body });
    const runId = (await run({ run_input: { query: 'hello' } })).json.run_id as string;
    const TURNS = 50;
    let sent = 0;
    let retries = 0;
    const client = async (name: string) => {
      while (sent < TURNS) {
        const current = (await api.call('GET', `/workflows/v1/workflow-runs/${runId}`)).json.turn_number as number;
        const query = `${name}-${current}`;
        const res = await run({ run_id: runId, turn_number: current, run_input: { query } });
        if (res.status === 200) sent++;
        else {
          expect(res.status).toBe(409);
          retries++;
        }
      }
    };
    await Promise.all([client('left'), client('right')]);
    const turns: { turn_number: number; request: { run_input: { query: string } }; response: { outputs: unknown } }[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: typeof turns; next_cursor: string | null } = (await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).json;
      turns.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor);
    expect(turns.map((t) => t.turn_number)).toEqual(Array.from({ length: turns.length }, (_, i) => i + 1));
    console.log(`two clients: ${turns.length} turns committed, ${retries} refused and retried`);

    // the same queries, one after the other, on a new run
    const replayId = (await run({ run_input: { query: turns[0]?.request.run_input.query } })).json.run_id as string;
    const replayed = [];
    for (const t of turns.slice(1)) replayed.push((await run({ run_id: replayId, run_input: { query: t.request.run_input.query } })).json.outputs);
    expect(replayed).toEqual(turns.slice(1).map((t) => t.response.outputs));
  }, 60_000);
});
