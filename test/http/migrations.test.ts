/**
 * Migrating paused runs onto a new version (`POST .../versions/{n}/migrate`), through the app on
 * DynamoDB Local: a run paused inside a Loop moves onto a version that adds a component after
 * the loop and finishes there, and one paused at an Agent's tool approval is approved there; a
 * run paused at a form the new version removed is refused and left exactly as it was; a dry run
 * changes nothing (the tenant's items scanned before and after); the migration is a turn of the
 * run's history; it races an answer for one slot.
 */
import { QueryCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dueSortKey } from '../../lib/store/sessions';
import { TIMER_INDEX } from '../../lib/store/table';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testTable } from '../helpers/dynamo';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let api: Served;
let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  // an Agent that asks to call its tool once, then reports what it said
  model.respond = (body) => {
    const results = body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
    return results.length === 0 ? { kind: 'tools', calls: [{ name: 'Researcher_0', arguments: { user_prompt: 'When?' } }], text: 'Let me ask.' } : { kind: 'text', text: `Report: ${results.join(' | ')}` };
  };
  api = await serveApp(testEngine({ openaiUrl: model.url }));
});
afterAll(async () => {
  await Promise.all([api?.close(), model?.close()]);
});

/** The loop fixture (three rounds, a form in each) and, as v2, the same with a Message after the loop. */
const LOOP_V1 = fixture('loop-with-form') as { components: Record<string, any> };
function loopV2(): unknown {
  const dsl = structuredClone(LOOP_V1);
  dsl.components['Message:AllAnswers'].downstream = ['Message:Done'];
  dsl.components['Message:Done'] = { obj: { component_name: 'Message', params: { content: ['Done on v2 after {Loop:AskThrice@answers}'] } }, downstream: [], upstream: ['Message:AllAnswers'] };
  return dsl;
}

const FORM = (fields: Record<string, unknown>, extra: Record<string, any> = {}) => graph({
  begin: ['Begin', { mode: 'task' }, ['UserFillUp:Ask']],
  'UserFillUp:Ask': ['UserFillUp', { enable_tips: true, tips: 'Who are you?', inputs: fields }, ['Message:Hello']],
  'Message:Hello': ['Message', { content: ['Hello {UserFillUp:Ask@name}'] }],
  ...extra,
});
const NAME = { name: { name: 'Name', type: 'line', optional: false } };
const WITHOUT_FORM = graph({ begin: ['Begin', { mode: 'task' }, ['Message:Hello']], 'Message:Hello': ['Message', { content: ['Hello nobody'] }] });

async function workflow(dsl: unknown): Promise<string> {
  const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'migrating', dsl } });
  expect(created.status).toBe(201);
  return created.json.id as string;
}

async function addVersion(id: string, dsl: unknown): Promise<number> {
  const added = await api.call('POST', `/workflows/v1/workflows/${id}/versions`, { body: { dsl } });
  expect(added.status).toBe(201);
  return added.json.version as number;
}

const execute = (id: string, body: unknown, headers: Record<string, string> = {}) => api.call('POST', `/workflows/v1/workflows/${id}/execute`, { body, headers });
const migrate = (id: string, n: number, body: unknown, headers: Record<string, string> = {}) => api.call('POST', `/workflows/v1/workflows/${id}/versions/${n}/migrate`, { body, headers });

/** Every item of the test tenant (the test table is shared: other tenants' items come and go). */
async function tenantItems(): Promise<unknown[]> {
  const { doc, tableName } = testTable();
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new ScanCommand({ TableName: tableName, FilterExpression: 'begins_with(pk, :t)', ExpressionAttributeValues: { ':t': `T#${api.tenant}#` }, ExclusiveStartKey: start, ConsistentRead: true }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items.map((i) => JSON.stringify(i)).sort();
}

/** Whether the run's timer is in the sparse timer index the pump reads. */
async function inTimerIndex(runId: string, dueAt: number): Promise<boolean> {
  const { doc, tableName } = testTable();
  const { Items = [] } = await doc.send(new QueryCommand({ TableName: tableName, IndexName: TIMER_INDEX, KeyConditionExpression: 'gsi2pk = :due AND gsi2sk = :sk', ExpressionAttributeValues: { ':due': 'DUE', ':sk': dueSortKey(dueAt, api.tenant, runId) } }));
  return Items.length > 0;
}

describe('migrating a run paused inside a Loop', () => {
  it('moves it onto a version that adds a component after the loop, where it resumes and finishes', async () => {
    const id = await workflow(LOOP_V1);
    const first = await execute(id, { run_input: {} });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, next_input_hint: { tips: 'Question 0: what is your favourite colour?' } });
    const runId = first.json.run_id as string;
    const second = await execute(id, { run_id: runId, turn_number: 1, run_input: { inputs: { colour: 'red' } } });
    expect(second.json).toMatchObject({ status: 'waiting_for_input', turn_number: 2, next_input_hint: { tips: 'Question 1: what is your favourite colour?' } });

    const v2 = await addVersion(id, loopV2());
    const moved = await migrate(id, v2, { runs: [runId] });
    expect(moved.status).toBe(200);
    expect(moved.json).toMatchObject({ workflow_id: id, version: 2, dry_run: false, next_cursor: null });
    const [item] = moved.json.items;
    expect(item).toMatchObject({
      run_id: runId,
      outcome: 'migrated',
      turn_number: 3,
      // the same form, asked as it was: the Loop's round counter came along
      next_input_hint: { component_id: 'UserFillUp:Question', tips: 'Question 1: what is your favourite colour?' },
      migration: { from_version: 1, to_version: 2, dropped: [], fields_added: [], variables_added: [] },
    });
    expect(item.migration.kept).toEqual(['begin', 'Loop:AskThrice', 'LoopItem:Round', 'UserFillUp:Question']);

    const run = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(run.json).toMatchObject({ version: 2, status: 'waiting_for_input', turn_number: 3 });

    const third = await execute(id, { run_id: runId, turn_number: 3, run_input: { inputs: { colour: 'green' } } });
    expect(third.json).toMatchObject({ version: 2, status: 'waiting_for_input', turn_number: 4, next_input_hint: { tips: 'Question 2: what is your favourite colour?' } });
    const last = await execute(id, { run_id: runId, turn_number: 4, run_input: { inputs: { colour: 'blue' } } });
    expect(last.json).toMatchObject({ version: 2, status: 'completed', turn_number: 5 });
    const messages = last.json.events.filter((e: any) => e.event === 'message').map((e: any) => e.data.content);
    // three rounds in all (one answered on v1), then the component v2 added
    expect(messages).toEqual(['You said: ["red","green","blue"]', 'Done on v2 after ["red","green","blue"]']);
    expect(last.json.outputs).toMatchObject({ content: 'Done on v2 after ["red","green","blue"]' });

    // the move is a turn of the run's history: who moved it, from which version to which
    const turns = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`);
    expect(turns.json.items.map((t: any) => t.turn_number)).toEqual([1, 2, 3, 4, 5]);
    const record = turns.json.items[2];
    expect(record.status).toBe('waiting_for_input');
    expect(record.request).toMatchObject({ command: 'migrate', migration: { from_version: 1, to_version: 2 }, actor: { kind: 'admin_key' } });
    expect(record.response).toMatchObject({ turn_number: 3, version: 2, migration: { from_version: 1, to_version: 2 } });
    expect(record.response.events.map((e: any) => e.event)).toEqual(['user_inputs']);
  });
});

describe('migrating a run paused at a tool approval', () => {
  const agent = (prompt: string, extra: Record<string, any> = {}) => graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Main']],
    'Agent:Main': ['Agent', { llm_id: 'writer@Local', sys_prompt: prompt, prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 3, approval: ['Researcher'], tools: [{ component_name: 'Agent', name: 'Researcher', params: { llm_id: 'writer@Local', sys_prompt: 'You look things up.', prompts: [{ role: 'user', content: '{sys.query}' }], user_prompt: '', description: 'Looks things up.', tools: [] } }] }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Main@content}'] }, Object.keys(extra)],
    ...extra,
  });

  it('moves it when the Agent is unchanged, and the approval finishes the run there without a model round made twice', async () => {
    const id = await workflow(agent('You write reports.'));
    const before = model.calls;
    const paused = await execute(id, { run_input: { query: 'Write about the bridge.' } });
    expect(paused.json).toMatchObject({ status: 'waiting_for_input', next_input_hint: { component_id: 'Agent:Main' } });
    const runId = paused.json.run_id as string;
    const v2 = await addVersion(id, agent('You write reports.', { 'Message:Extra': ['Message', { content: ['filed on v2'] }] }));
    const moved = await migrate(id, v2, { runs: [runId] });
    expect(moved.json.items[0]).toMatchObject({ outcome: 'migrated', next_input_hint: { component_id: 'Agent:Main', tips: paused.json.next_input_hint.tips } });
    const done = await execute(id, { run_id: runId, turn_number: 2, run_input: { inputs: { decision: 'approve' } } });
    expect(done.json).toMatchObject({ version: 2, status: 'completed', turn_number: 3 });
    expect(done.json.events.filter((e: any) => e.event === 'message').map((e: any) => e.data.content)).toEqual([expect.stringContaining('Report: '), 'filed on v2']);
    // main round 1 before the move; the researcher and main round 2 after it: each once
    expect(model.calls - before).toBe(3);

    const other = (await execute(id, { run_input: { query: 'Again.' } })).json.run_id as string;
    const v3 = await addVersion(id, agent('You write short reports.'));
    const refused = await migrate(id, v3, { runs: [other] });
    expect(refused.json.items[0]).toMatchObject({ outcome: 'refused', code: 'migration_refused', component_id: 'Agent:Main' });
  });
});

describe('refusals', () => {
  it('refuses a run paused at a form the new version removed, and leaves it exactly as it was', async () => {
    const id = await workflow(FORM(NAME));
    const paused = await execute(id, { run_input: {} });
    const runId = paused.json.run_id as string;
    const v2 = await addVersion(id, WITHOUT_FORM);
    const before = await tenantItems();
    const answer = await migrate(id, v2, { runs: [runId] });
    expect(answer.status).toBe(200);
    expect(answer.json.items).toEqual([{
      run_id: runId,
      outcome: 'refused',
      code: 'migration_refused',
      reason: 'component "UserFillUp:Ask", where the run waits, does not exist in version 2',
      from_version: 1,
      component_id: 'UserFillUp:Ask',
    }]);
    expect(await tenantItems()).toEqual(before);
    // still on version 1: its form is answered there
    const done = await execute(id, { run_id: runId, turn_number: 1, run_input: { inputs: { name: 'Ada' } } });
    expect(done.json).toMatchObject({ version: 1, status: 'completed', turn_number: 2 });
    expect(done.json.events.find((e: any) => e.event === 'message').data.content).toBe('Hello Ada');
  });

  it('refuses a form whose field changed type, naming the field; a new field is asked with the rest', async () => {
    const id = await workflow(FORM(NAME));
    const runA = (await execute(id, { run_input: {} })).json.run_id as string;
    const typed = await addVersion(id, FORM({ name: { name: 'Name', type: 'integer', optional: false } }));
    const refused = await migrate(id, typed, { runs: [runA] });
    expect(refused.json.items[0]).toMatchObject({ outcome: 'refused', code: 'migration_refused', component_id: 'UserFillUp:Ask', field: 'name', reason: 'field "name" of the form "UserFillUp:Ask" is line but integer in version 2' });

    const wider = await addVersion(id, FORM({ ...NAME, city: { name: 'City', type: 'line', optional: false } }));
    const moved = await migrate(id, wider, { runs: [runA] });
    expect(moved.json.items[0]).toMatchObject({ outcome: 'migrated', migration: { fields_added: [{ component_id: 'UserFillUp:Ask', field: 'city', optional: false }] } });
    expect(Object.keys(moved.json.items[0].next_input_hint.inputs)).toEqual(['name', 'city']);
  });

  it('refuses runs that are not paused, not of this workflow, or missing; skips those already there', async () => {
    const id = await workflow(FORM(NAME));
    const other = await workflow(FORM(NAME));
    const done = (await execute(id, { run_input: {} })).json.run_id as string;
    await execute(id, { run_id: done, run_input: { inputs: { name: 'Ada' } } });
    const foreign = (await execute(other, { run_input: {} })).json.run_id as string;
    const v2 = await addVersion(id, FORM(NAME));
    const there = (await execute(id, { run_input: {} })).json.run_id as string; // started on the active version, 2
    const missing = 'f'.repeat(32);
    const answer = await migrate(id, v2, { runs: [done, foreign, missing, there] });
    expect(answer.json.items).toEqual([
      { run_id: done, outcome: 'refused', code: 'not_waiting_for_input', reason: 'the run is completed, not waiting for input', from_version: 1 },
      { run_id: foreign, outcome: 'refused', code: 'not_found', reason: 'no such run of this workflow', from_version: null },
      { run_id: missing, outcome: 'refused', code: 'not_found', reason: 'no such run of this workflow', from_version: null },
      { run_id: there, outcome: 'skipped', reason: 'already on version 2', from_version: 2 },
    ]);
  });
});

describe('the request', () => {
  it('dry run: says what would happen to each paused run and changes nothing', async () => {
    const id = await workflow(FORM(NAME));
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push((await execute(id, { run_input: {} })).json.run_id as string);
    const v2 = await addVersion(id, FORM(NAME, { 'Message:Extra': ['Message', { content: ['more'] }] }));
    const before = await tenantItems();
    const planned = await migrate(id, v2, { all_paused: true, dry_run: true });
    expect(planned.status).toBe(200);
    expect(planned.json.dry_run).toBe(true);
    expect(planned.json.items.map((i: any) => [i.run_id, i.outcome, i.turn_number])).toEqual(runs.reverse().map((r) => [r, 'would_migrate', 2]));
    expect(await tenantItems()).toEqual(before);
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${runs[0]}`);
    expect(run.json).toMatchObject({ version: 1, turn_number: 1 });
  });

  it('all_paused pages with a cursor; each run is its own decision', async () => {
    const id = await workflow(FORM(NAME));
    for (let i = 0; i < 3; i++) await execute(id, { run_input: {} });
    const v2 = await addVersion(id, FORM(NAME));
    const page1 = await migrate(id, v2, { all_paused: true, limit: 2 });
    expect(page1.json.items.map((i: any) => i.outcome)).toEqual(['migrated', 'migrated']);
    expect(page1.json.next_cursor).toEqual(expect.any(String));
    const page2 = await migrate(id, v2, { all_paused: true, limit: 2, cursor: page1.json.next_cursor });
    expect(page2.json.items.map((i: any) => i.outcome)).toEqual(['migrated']);
    // from the start again: every paused run is there already
    const again = await migrate(id, v2, { all_paused: true });
    expect(again.json.items.map((i: any) => i.outcome)).toEqual(['skipped', 'skipped', 'skipped']);
  });

  it('with an Idempotency-Key a retry gets the same answer; the key with another request is refused', async () => {
    const id = await workflow(FORM(NAME));
    const runId = (await execute(id, { run_input: {} })).json.run_id as string;
    const v2 = await addVersion(id, FORM(NAME));
    const headers = { 'idempotency-key': `migrate-${runId}` };
    const first = await migrate(id, v2, { runs: [runId] }, headers);
    const retry = await migrate(id, v2, { runs: [runId] }, headers);
    expect(first.json.items[0].outcome).toBe('migrated');
    expect(retry.text).toBe(first.text);
    const other = await migrate(id, v2, { runs: [runId], dry_run: true }, headers);
    expect(other.status).toBe(422);
    expect(other.json.code).toBe('idempotency_mismatch');
  });

  it('refuses what is malformed, naming the field; execute keys; unknown workflows and versions', async () => {
    const id = await workflow(FORM(NAME));
    const runId = (await execute(id, { run_input: {} })).json.run_id as string;
    const cases: [unknown, string][] = [
      [{}, 'runs'],
      [{ runs: [runId], all_paused: true }, 'runs'],
      [{ runs: [runId, runId] }, 'runs'],
      [{ runs: ['nope'] }, 'runs.0'],
      [{ runs: Array.from({ length: 26 }, (_, i) => i.toString(16).padStart(32, '0')) }, 'runs'],
      [{ runs: [runId], limit: 2 }, 'limit'],
      [{ all_paused: true, cursor: 'bogus' }, 'cursor'],
      [{ runs: [runId], dryrun: true }, 'dryrun'],
    ];
    for (const [body, field] of cases) {
      const answer = await migrate(id, 1, body);
      expect([answer.status, answer.json.code], JSON.stringify(body)).toEqual([400, 'invalid_request']);
      if (field !== 'cursor') expect(answer.json.field, JSON.stringify(body)).toBe(field);
    }
    expect((await migrate(id, 9, { runs: [runId] })).status).toBe(404);
    expect((await migrate('wf_nope', 1, { runs: [runId] })).status).toBe(404);
    const executeKey = await api.addKey(api.tenant, 'execute', [id]);
    const forbidden = await api.call('POST', `/workflows/v1/workflows/${id}/versions/1/migrate`, { key: executeKey, body: { runs: [runId] } });
    expect([forbidden.status, forbidden.json.code]).toEqual([403, 'forbidden']);
  });
});

describe('migration against an answer', () => {
  it('races for the same turn: exactly one of them commits it, and the run is consistent with the winner', async () => {
    const id = await workflow(FORM(NAME));
    const v2 = await addVersion(id, FORM(NAME, { 'Message:Extra': ['Message', { content: ['more'] }] }));
    for (let round = 0; round < 10; round++) {
      const runId = (await execute(id, { run_input: {} }, {}).then((r) => r)).json.run_id as string;
      // started on the active version: move it back to 1 first, then race the move to 2 against an answer
      expect((await migrate(id, 1, { runs: [runId] })).json.items[0].outcome).toBe('migrated');
      const [moved, answered] = await Promise.all([
        migrate(id, v2, { runs: [runId] }),
        execute(id, { run_id: runId, turn_number: 2, run_input: { inputs: { name: 'Ada' } } }),
      ]);
      const migrated = moved.json.items[0].outcome === 'migrated';
      expect(migrated !== (answered.status === 200), `round ${round}: ${moved.text} / ${answered.text}`).toBe(true);
      const run = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
      if (migrated) {
        expect(answered.json.code).toMatch(/^turn_(conflict|in_progress)$/);
        expect(run.json).toMatchObject({ version: 2, turn_number: 3, status: 'waiting_for_input' });
      } else {
        expect(moved.json.items[0]).toMatchObject({ outcome: 'refused', code: expect.stringMatching(/^(turn_conflict|turn_in_progress|not_waiting_for_input)$/) });
        expect(run.json).toMatchObject({ version: 1, turn_number: 3, status: 'completed' });
      }
    }
  });
});

describe('two migrations of one run at once', () => {
  it('move it once', async () => {
    const id = await workflow(FORM(NAME));
    const v2 = await addVersion(id, FORM(NAME, { 'Message:Extra': ['Message', { content: ['more'] }] }));
    const runId = (await execute(id, { run_input: {} })).json.run_id as string;
    await migrate(id, 1, { runs: [runId] });
    const answers = await Promise.all(Array.from({ length: 5 }, () => migrate(id, v2, { runs: [runId] })));
    const outcomes = answers.map((a) => a.json.items[0].outcome);
    expect(outcomes.filter((o) => o === 'migrated')).toHaveLength(1);
    // the others lost the slot, or read the run once it was moved
    for (const a of answers.filter((x) => x.json.items[0].outcome !== 'migrated')) {
      expect(a.json.items[0]).toMatchObject({ outcome: expect.stringMatching(/^(refused|skipped)$/) });
      if (a.json.items[0].outcome === 'refused') expect(a.json.items[0].code).toMatch(/^turn_(conflict|in_progress)$/);
    }
    const turns = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`);
    expect(turns.json.items.map((t: any) => [t.turn_number, t.request.migration?.to_version ?? null])).toEqual([[1, null], [2, 1], [3, 2]]);
  });
});

describe('a form timer across a migration', () => {
  it('keeps its deadline when the new version has the timer, and is disarmed when it has none', async () => {
    const withTimer = (seconds: number | undefined) => {
      const dsl = FORM(NAME) as { components: Record<string, any> };
      if (seconds !== undefined) dsl.components['UserFillUp:Ask'].obj.params.timeout_seconds = seconds;
      return dsl;
    };
    const id = await workflow(withTimer(3600));
    const runId = (await execute(id, { run_input: {} })).json.run_id as string;
    const before = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(before.json.timer_due_at).toEqual(expect.any(String));
    const longer = await addVersion(id, withTimer(7200));
    await migrate(id, longer, { runs: [runId] });
    const kept = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(kept.json).toMatchObject({ version: longer, timer_due_at: before.json.timer_due_at, has_background_work: true });
    expect(await inTimerIndex(runId, Date.parse(before.json.timer_due_at))).toBe(true);
    const none = await addVersion(id, withTimer(undefined));
    await migrate(id, none, { runs: [runId] });
    const disarmed = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(disarmed.json).toMatchObject({ version: none, timer_due_at: null, has_background_work: false });
    // and the timer index forgot it: the pump will not find it; firing it now finds no timer
    expect(await inTimerIndex(runId, Date.parse(before.json.timer_due_at))).toBe(false);
    const pumped = await api.call('POST', `/workflows/v1/workflows/${id}/runs/${runId}/pump-companions`);
    expect([pumped.status, pumped.json.code]).toEqual([409, 'no_timer_armed']);
  });
});

describe('forks of a migrated run', () => {
  it('pin the version the forked turn ran on', async () => {
    const id = await workflow(FORM(NAME));
    const v2 = await addVersion(id, FORM(NAME, { 'Message:Extra': ['Message', { content: ['more'] }] }));
    const runId = (await execute(id, { run_input: {} })).json.run_id as string;
    await migrate(id, 1, { runs: [runId] });
    await migrate(id, v2, { runs: [runId] });
    const early = await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 2 } });
    const late = await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 3 } });
    expect([early.json.version, late.json.version]).toEqual([1, 2]);
  });
});
