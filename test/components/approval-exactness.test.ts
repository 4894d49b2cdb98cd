/**
 * Approval exactness: generated Agents — one to three ledger tools, some of them approved first
 * (all, by name, or by a condition on the amount), an optional sub-Agent with tools and
 * approvals of its own — run scripted model answers, and a generated person decides each
 * approval: approve, approve with edited arguments, or reject with a reason. Each conversation
 * is driven twice: in one Canvas, and serialized to JSON and restored in a fresh Canvas (the
 * DSL compiled again from JSON) at every pause. Both give the same events, turn by turn, and the
 * same outputs; and the model server and the ledger server, real HTTP servers on 127.0.0.1,
 * receive each call exactly once: no request twice, and as many as the calls the Agent's trace
 * says were made (rejected ones none; an edited one with its edit, never as proposed).
 */
import fc from 'fast-check';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Canvas, type CanvasEvent, compileWorkflow } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { outboundRequest } from '../../lib/outbound';
import { createToolRegistry, type ToolKind } from '../../lib/tools';
import { collect } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { json, ScriptedServer } from '../helpers/scripted-server';
import { testServices } from '../helpers/services';
import { OpenAiServer, type RecordedRequest, type Reply } from '../llm/openai-server';

const LEDGERS = ['ledger_a', 'ledger_b', 'ledger_c'] as const;
const HELPER = 'Helper';
const MAIN_PROMPT = 'You keep the books.';
const HELPER_PROMPT = 'You help with the books.';
const REJECTED = 'The user rejected this tool call';

// ---- the generated agents ------------------------------------------------------------------

type Approval = null | 'all' | string[] | Record<string, true | { amount: { gt: number } }>;
interface Call {
  /** Which of the Agent's tools (modulo how many it has). */
  tool: number;
  amount: number;
}
interface AgentSpec {
  ledgers: string[];
  approval: Approval;
  /** The rounds of tool calls the model makes before it answers. */
  rounds: { text: boolean; calls: Call[] }[];
}
interface Spec {
  main: AgentSpec;
  /** The sub-Agent, offered to the main Agent after its ledgers. */
  helper: AgentSpec | null;
}
type Decision = 'approve' | 'edit' | 'reject';

const callArb = fc.record({ tool: fc.nat({ max: 11 }), amount: fc.integer({ min: 0, max: 200 }) });
const roundsArb = (min: number, max: number) => fc.array(fc.record({ text: fc.boolean(), calls: fc.array(callArb, { minLength: 1, maxLength: 2 }) }), { minLength: min, maxLength: max });

/** `approval` over these tools: none, all, some by name (the entry's or the model's), or per tool true or a condition on the amount. */
function approvalArb(ledgers: readonly string[], helper: boolean): fc.Arbitrary<Approval> {
  const named = [...ledgers.flatMap((l, i) => [l, `${l}_${i}`]), ...(helper ? [HELPER] : [])];
  const rule = (name: string) => (name === HELPER ? fc.constant(true as const) : fc.oneof(fc.constant(true as const), fc.integer({ min: 0, max: 200 }).map((gt) => ({ amount: { gt } }))));
  return fc.oneof(
    fc.constant(null),
    fc.constant('all' as const),
    fc.subarray(named, { minLength: 1 }),
    fc.subarray([...ledgers, ...(helper ? [HELPER] : [])], { minLength: 1 }).chain((names) => fc.tuple(...names.map(rule)).map((rules) => Object.fromEntries(names.map((n, i) => [n, rules[i]])) as Approval)),
  );
}

const agentArb = (helper: boolean, rounds: [number, number]) =>
  fc.subarray([...LEDGERS], { minLength: 1 }).chain((ledgers) => fc.record({ ledgers: fc.constant(ledgers), approval: approvalArb(ledgers, helper), rounds: roundsArb(...rounds) }));

const specArb: fc.Arbitrary<Spec> = fc.boolean().chain((withHelper) =>
  fc.record({ main: agentArb(withHelper, [1, 3]), helper: withHelper ? agentArb(false, [0, 2]).map((h) => h as AgentSpec | null) : fc.constant(null) }),
);

const decisionsArb = fc.array(fc.constantFrom<Decision>('approve', 'edit', 'reject'), { minLength: 1, maxLength: 12 });

const agentParams = (spec: AgentSpec, sysPrompt: string, extra: Record<string, unknown> = {}) => ({
  llm_id: 'books@Local',
  sys_prompt: sysPrompt,
  max_rounds: spec.rounds.length + 1,
  approval: spec.approval,
  tools: spec.ledgers.map((name) => ({ component_name: 'Ledger', name, params: {} })),
  ...extra,
});

function buildDsl(spec: Spec): unknown {
  const main = agentParams(spec.main, MAIN_PROMPT, { prompts: [{ role: 'user', content: '{sys.query}' }] });
  if (spec.helper) main.tools.push({ component_name: 'Agent', name: HELPER, params: { ...agentParams(spec.helper, HELPER_PROMPT), prompts: [], user_prompt: '', description: 'Books what it is asked to.' } as never });
  return graph({
    begin: ['Begin', { mode: 'task' }, ['Agent:Main']],
    'Agent:Main': ['Agent', main, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Main@content}'] }],
  });
}

/** The tools an Agent offers the model, in order, with the names the model calls them by. */
function toolsOf(spec: AgentSpec, helper: boolean): { name: string; modelName: string }[] {
  return [...spec.ledgers, ...(helper ? [HELPER] : [])].map((name, i) => ({ name, modelName: `${name}_${i}` }));
}

/**
 * The model: which Agent asks (by its system prompt) and which round (by the assistant messages
 * so far) decide the answer. Every call's arguments carry a label made from the invocation's
 * own request, so no two calls of a conversation are alike.
 */
function scriptedModel(spec: Spec): (body: RecordedRequest['body']) => Reply {
  return (body) => {
    const isHelper = body.messages[0]?.content === HELPER_PROMPT;
    const agent = isHelper ? (spec.helper as AgentSpec) : spec.main;
    const tools = toolsOf(agent, !isHelper && spec.helper !== null);
    const asked = isHelper ? (/QUERY:\n(.*)/.exec(body.messages.find((m) => m.role === 'user')?.content ?? '')?.[1] ?? '?') : 'main';
    const round = body.messages.filter((m) => m.role === 'assistant').length;
    const plan = agent.rounds[round];
    if (!plan) {
      const results = body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
      return { kind: 'text', text: `${asked} booked: ${results.join(' | ') || 'nothing'}` };
    }
    const calls = plan.calls.map((c, i) => {
      const tool = tools[c.tool % tools.length]!;
      const label = `${asked}.r${round}.c${i}`;
      return { name: tool.modelName, arguments: tool.name === HELPER ? { user_prompt: label } : { item: label, amount: c.amount } };
    });
    return { kind: 'tools', calls, ...(plan.text ? { text: `${asked} round ${round}.` } : {}) };
  };
}

// ---- the servers and the ledger tool -------------------------------------------------------

let model: OpenAiServer;
let ledger: ScriptedServer;

beforeAll(async () => {
  [model, ledger] = await Promise.all([
    OpenAiServer.start(),
    ScriptedServer.start((request) => {
      const { item, amount } = JSON.parse(request.body) as { item: string; amount: number };
      return json(200, { booked: `${request.path.split('/').at(-1)}:${item}:${amount}` });
    }),
  ]);
});
afterAll(async () => {
  await Promise.all([model.close(), ledger.close()]);
});

/** A tool of the test's own kind: it books its arguments on the ledger server, through the run's guard. */
const ledgerKind: ToolKind<Record<string, unknown>> = {
  name: 'Ledger',
  params: z.looseObject({}),
  create: (entry) => ({
    name: entry.name,
    description: 'Books an item with an amount.',
    parameters: { type: 'object', properties: { item: { type: 'string' }, amount: { type: 'integer', minimum: 0 } }, required: ['item', 'amount'], additionalProperties: false },
    timeoutMs: 30_000,
    async invoke(args, ctx) {
      const res = await outboundRequest({ url: `${ledger.url}/book/${entry.name}`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(args), guard: ctx.services.guard!, timeoutMs: 30_000, signal: ctx.signal });
      return { kind: 'result', content: res.body };
    },
  }),
};
const tools = createToolRegistry([ledgerKind]);
const registry = withComponents(createAgent(tools));
const CLOCK = () => Date.UTC(2026, 5, 1);
const options = () => ({ seed: 11, clock: CLOCK, services: { ...testServices({ openaiUrl: model.url, allow: ['127.0.0.1'] }), tools } });

// ---- one conversation ----------------------------------------------------------------------

interface Applied {
  decision: Decision;
  proposed: Record<string, unknown>;
  sent?: Record<string, unknown>;
}

interface Drive {
  turns: unknown[];
  outputs: unknown;
  status: string;
  trace: Trace[];
  applied: Applied[];
  modelRequests: string[];
  ledgerItems: string[];
}

interface Trace {
  name: string;
  arguments: Record<string, unknown>;
  result: string;
  calls?: Trace[];
}

/** An edit the tool's parameters accept: the item renamed, the amount raised. */
function edited(args: Record<string, unknown>): Record<string, unknown> {
  return typeof args.user_prompt === 'string' ? { user_prompt: `${args.user_prompt}-e` } : { item: `${String(args.item)}-e`, amount: Number(args.amount) + 1 };
}

/** Events as both drives give them: tool call ids (the model server numbers them per request) and times left out. */
function comparable(events: readonly CanvasEvent[]): unknown {
  return JSON.parse(JSON.stringify(events).replace(/call_\d+_\d+/g, 'call'), (key, value: unknown) => (key === 'created_at' || key === 'elapsed_time' ? 0 : value));
}

async function drive(dsl: unknown, decisions: readonly Decision[], restoreAtPauses: boolean): Promise<Drive> {
  const modelFrom = model.requests.length;
  const ledgerFrom = ledger.requests.length;
  let canvas = Canvas.create(compileWorkflow(dsl, registry), options());
  const turns: unknown[] = [];
  const applied: Applied[] = [];
  let events = await collect(canvas.run({ query: 'Book the month.' }));
  turns.push(comparable(events));
  while (events.at(-1)?.event === 'user_inputs' && turns.length < 60) {
    const hint = events.at(-1)!.data as { inputs: { arguments: { value: Record<string, unknown> } } };
    const proposed = hint.inputs.arguments.value;
    const decision = decisions[applied.length % decisions.length] as Decision;
    const inputs =
      decision === 'approve' ? { decision: 'approve' } : decision === 'edit' ? { decision: 'approve', arguments: edited(proposed) } : { decision: 'reject', reason: `not ${JSON.stringify(proposed)}` };
    applied.push({ decision, proposed, ...(decision === 'edit' ? { sent: inputs.arguments as Record<string, unknown> } : {}) });
    if (restoreAtPauses) {
      // a fresh process: the DSL and the state both arrive as JSON
      const saved = JSON.stringify(canvas.serialize());
      canvas = Canvas.restore(compileWorkflow(JSON.parse(JSON.stringify(dsl)), registry), JSON.parse(saved), options());
    }
    events = await collect(canvas.run({ inputs }));
    turns.push(comparable(events));
  }
  const state = canvas.serialize();
  const outputs = state.nodes['Agent:Main']?.outputs as { use_tools?: Trace[] } | undefined;
  return {
    turns,
    outputs: JSON.parse(JSON.stringify(outputs ?? null).replace(/call_\d+_\d+/g, 'call')) as unknown,
    status: state.status,
    trace: outputs?.use_tools ?? [],
    applied,
    modelRequests: model.requests.slice(modelFrom).map((r) => JSON.stringify(r.body.messages)),
    ledgerItems: ledger.requests.slice(ledgerFrom).map((r) => String((JSON.parse(r.body) as { item: string }).item)),
  };
}

/** What the calls in a trace cost the servers: model rounds and ledger bookings, rejected calls none. */
function expectedCalls(trace: readonly Trace[], spec: Spec): { model: number; ledger: number } {
  let modelCalls = spec.main.rounds.length + 1;
  let ledgerCalls = 0;
  const walk = (calls: readonly Trace[]) => {
    for (const call of calls) {
      if (call.result.startsWith(REJECTED)) continue;
      if (call.name.startsWith(`${HELPER}_`)) {
        modelCalls += (spec.helper as AgentSpec).rounds.length + 1;
        walk(call.calls ?? []);
      } else ledgerCalls++;
    }
  };
  walk(trace);
  return { model: modelCalls, ledger: ledgerCalls };
}

describe('approval exactness: one Canvas vs a fresh Canvas from JSON at every pause', () => {
  it('gives the same events and outputs, and the model and ledger servers get each call exactly once', async () => {
    const seen = { paused: 0, multiplePauses: 0, edits: 0, rejections: 0, helperPaused: 0, conditionHeld: 0, conditionPassed: 0 };
    await fc.assert(
      fc.asyncProperty(specArb, decisionsArb, async (spec, decisions) => {
        model.respond = scriptedModel(spec);
        const dsl = buildDsl(spec);
        const continuous = await drive(dsl, decisions, false);
        const restored = await drive(dsl, decisions, true);

        expect(continuous.status).toBe('completed');
        expect(restored.turns).toEqual(continuous.turns);
        expect(restored.outputs).toEqual(continuous.outputs);
        expect(restored.applied).toEqual(continuous.applied);

        for (const run of [continuous, restored]) {
          const expected = expectedCalls(run.trace, spec);
          // each model round and each booking once: none repeated on resume, none missing
          expect(run.modelRequests.length).toBe(expected.model);
          expect(new Set(run.modelRequests).size).toBe(run.modelRequests.length);
          expect(run.ledgerItems.length).toBe(expected.ledger);
          expect(new Set(run.ledgerItems).size).toBe(run.ledgerItems.length);
          // an edited booking went out as edited, never as proposed; a rejected one not at all
          for (const a of run.applied) {
            if (a.proposed.item === undefined) continue;
            if (a.decision === 'reject') expect(run.ledgerItems).not.toContain(a.proposed.item);
            if (a.decision === 'edit') {
              expect(run.ledgerItems).toContain(a.sent?.item);
              expect(run.ledgerItems).not.toContain(a.proposed.item);
            }
          }
        }

        const pauses = continuous.applied.length;
        if (pauses > 0) seen.paused++;
        if (pauses > 1) seen.multiplePauses++;
        if (continuous.applied.some((a) => a.decision === 'edit')) seen.edits++;
        if (continuous.applied.some((a) => a.decision === 'reject')) seen.rejections++;
        // a sub-Agent's call: its label is made from the main Agent's call that asked it
        if (continuous.applied.some((a) => (String(a.proposed.item ?? '').match(/\.r\d/g) ?? []).length > 1)) seen.helperPaused++;
        const conditional = JSON.stringify(spec.main.approval).includes('"gt"');
        if (conditional && pauses > 0) seen.conditionHeld++;
        if (conditional && continuous.ledgerItems.length > 0 && pauses === 0) seen.conditionPassed++;
      }),
      { seed: 20261205, numRuns: 100 },
    );
    // the generator must actually exercise what this is about
    expect(seen.paused).toBeGreaterThan(40);
    expect(seen.multiplePauses).toBeGreaterThan(20);
    expect(seen.edits).toBeGreaterThan(15);
    expect(seen.rejections).toBeGreaterThan(15);
    expect(seen.helperPaused).toBeGreaterThan(3);
    expect(seen.conditionHeld).toBeGreaterThan(3);
    expect(seen.conditionPassed).toBeGreaterThan(1);
  }, 300_000);
});
