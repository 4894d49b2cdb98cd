/**
 * The core invariant: serialize at any pause, load in a fresh Canvas, resume — and get the
 * same events and outputs as one Canvas kept across all turns. Workflows and the answers to
 * their forms are generated; each workflow is driven twice by the same deterministic user.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Canvas, type CanvasEvent, compileWorkflow, type RunInput, type TurnCheckpoint } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { collect, fixture } from '../helpers/canvas';
import { testServices } from '../helpers/services';
import { streamer } from '../helpers/streamer';
import { OpenAiServer, type RecordedRequest, type Reply } from '../llm/openai-server';
import { answerFor, buildDsl, generatedKnowledge, workflowSpecArb } from '../helpers/workflow-generator';

const registry = withComponents(streamer);

/**
 * A model whose answer depends only on what it is sent, so both drives get the same ones.
 * Shown knowledge blocks, it cites one of them half of the time.
 */
function deterministicModel(body: RecordedRequest['body']): Reply {
  const text = body.messages.map((m) => m.content).join('|');
  let hash = 0;
  for (const ch of text) hash = (hash * 31 + ch.charCodeAt(0)) | 0;
  const isClassification = body.messages[0]?.content.startsWith('You sort user messages');
  if (isClassification) return { kind: 'text', text: hash % 2 === 0 ? 'alpha' : 'beta' };
  const shown = [...body.messages.filter((m) => m.role !== 'system').map((m) => m.content).join('\n').matchAll(/\nID: (\d+)/g)].map((m) => m[1]);
  const cite = shown.length > 0 && hash % 2 === 0 ? ` [ID:${shown[Math.abs(hash) % shown.length]}]` : '';
  return { kind: 'text', text: `answer ${Math.abs(hash) % 1000} to ${body.messages.length} messages${cite}`, chunks: 1 + (Math.abs(hash) % 4) };
}

/** The knowledge generated Retrievals search: every search is counted. */
const knowledge = generatedKnowledge();

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
  server.respond = deterministicModel;
});
afterAll(async () => {
  await server.close();
});

const TERMINAL = new Set([
  'workflow_finished',
  'workflow_failed',
  'workflow_cancelled',
  'workflow_aborted',
  'user_inputs',
]);
const MAX_TURNS = 80;
const CLOCK = () => Date.UTC(2026, 5, 1);

/** A user who answers forms in a way decided by `choices`: full, empty, partial, or a query. */
function user(choices: readonly number[]) {
  let turn = 0;
  let stalls = 0;
  let passes = 0;
  return (previous: readonly CanvasEvent[] | undefined, terminal: boolean): RunInput | undefined => {
    turn++;
    const k = turn;
    if (previous === undefined) return { query: 'start', inputs: k % 3 === 0 ? { topic: 'early' } : {} };
    const end = previous.at(-1);
    if (end?.event === 'user_inputs') {
      const fields = Object.entries(end.data.inputs);
      const choice = stalls >= 3 ? 0 : (choices[turn % choices.length] ?? 0);
      if (choice === 0 || fields.length === 0) stalls = 0;
      else stalls++;
      const full = Object.fromEntries(fields.map(([key, f], i) => [key, answerFor(f.type, k + i, f.options)]));
      switch (choice) {
        case 1:
          return { inputs: {} };
        case 2: {
          const [firstKey, firstField] = fields[0] ?? [];
          return firstKey && firstField
            ? { inputs: { [firstKey]: { type: firstField.type, value: answerFor(firstField.type, k, firstField.options) } } }
            : { inputs: full };
        }
        case 3:
          return { query: `question ${k}` };
        default:
          return { inputs: full, ...(k % 4 === 0 ? { query: `also ${k}` } : {}) };
      }
    }
    // a finished pass: a conversational run takes one more query, then we stop
    if (terminal || passes >= 1) return undefined;
    passes++;
    return { query: `again ${k}` };
  };
}

interface Transcript {
  turns: unknown[][];
  finalState: unknown;
  /** Requests the model server received during the drive. */
  modelCalls: number;
  /** LLM and Categorize nodes that finished during the drive. */
  modelNodes: number;
  /** Turns stopped at a checkpoint and finished in another Canvas. */
  suspensions: number;
  /** Searches the knowledge service received, and Retrieval nodes that finished. */
  retrievals: number;
  retrievalNodes: number;
}

function normalize(events: readonly CanvasEvent[]): unknown[] {
  return events.map((e) => {
    const data = { ...(e.data as Record<string, unknown>) };
    delete data.created_at;
    delete data.elapsed_time;
    return { event: e.event, data };
  });
}

function stateWithoutClock(canvas: Canvas): unknown {
  const state = JSON.parse(JSON.stringify(canvas.serialize())) as {
    pass: { started_at?: number } | null;
    nodes: Record<string, { since?: number }>;
    globals: Record<string, unknown>;
  };
  if (state.pass) delete state.pass.started_at;
  for (const node of Object.values(state.nodes)) delete node.since;
  delete state.globals['sys.date'];
  return state;
}

function checkTurn(events: readonly CanvasEvent[]): void {
  const ends = events.filter((e) => TERMINAL.has(e.event));
  expect(ends).toHaveLength(1);
  expect(TERMINAL.has(events.at(-1)?.event ?? '')).toBe(true);
}

/**
 * How turns are run: `continuous` keeps one Canvas; `fresh` reloads it from JSON before each
 * turn; `checkpointed` takes a checkpoint between batches and goes on; `suspending` stops the
 * turn at every `period`-th checkpoint and finishes it in a fresh Canvas built from JSON.
 */
type Mode = 'continuous' | 'fresh' | 'checkpointed' | { suspendEvery: number };

async function runTurn(canvas: Canvas, input: RunInput, mode: Mode, rebuild: (state: unknown) => Canvas): Promise<{ canvas: Canvas; events: CanvasEvent[]; suspensions: number }> {
  if (mode === 'continuous' || mode === 'fresh') return { canvas, events: await collect(canvas.run(input)), suspensions: 0 };
  let batches = 0;
  let saved = '';
  const control = {
    afterBatch(checkpoint: TurnCheckpoint): 'continue' | 'suspend' {
      batches++;
      if (mode === 'checkpointed' || batches % mode.suspendEvery !== 0) return 'continue';
      saved = JSON.stringify(checkpoint);
      return 'suspend';
    },
  };
  const events = await collect(canvas.run(input, control));
  let current = canvas;
  let suspensions = 0;
  while (current.isSuspended) {
    suspensions++;
    // another process: the checkpoint arrives as JSON
    const checkpoint = JSON.parse(saved) as TurnCheckpoint;
    current = rebuild(checkpoint.state);
    events.push(...(await collect(current.continueTurn(checkpoint, control))));
  }
  return { canvas: current, events, suspensions };
}

async function drive(dsl: unknown, choices: readonly number[], mode: Mode): Promise<Transcript> {
  const freshEachTurn = mode === 'fresh';
  const options = { seed: 42, clock: CLOCK, services: testServices({ openaiUrl: server.url, knowledge }) };
  const callsBefore = server.calls;
  const retrievalsBefore = knowledge.retrieves;
  let modelNodes = 0;
  let retrievalNodes = 0;
  let suspensions = 0;
  let canvas = Canvas.create(compileWorkflow(dsl, registry), options);
  const next = user(choices);
  const turns: unknown[][] = [];
  let input = next(undefined, false);
  while (input !== undefined && turns.length < MAX_TURNS) {
    if (freshEachTurn) {
      // a new process: the DSL and the state both arrive as JSON
      const saved = JSON.stringify(canvas.serialize());
      canvas = Canvas.restore(compileWorkflow(JSON.parse(JSON.stringify(dsl)), registry), JSON.parse(saved), options);
    }
    const ran = await runTurn(canvas, input, mode, (state) => Canvas.restore(compileWorkflow(JSON.parse(JSON.stringify(dsl)), registry), state, options));
    canvas = ran.canvas;
    suspensions += ran.suspensions;
    const { events } = ran;
    checkTurn(events);
    modelNodes += events.filter((e) => e.event === 'node_finished' && (e.data.component_type === 'LLM' || e.data.component_type === 'Categorize')).length;
    retrievalNodes += events.filter((e) => e.event === 'node_finished' && e.data.component_type === 'Retrieval').length;
    turns.push(normalize(events));
    input = next(events, canvas.isTerminal);
  }
  return { turns, finalState: stateWithoutClock(canvas), modelCalls: server.calls - callsBefore, modelNodes, suspensions, retrievals: knowledge.retrieves - retrievalsBefore, retrievalNodes };
}

describe('exactness: one Canvas vs a fresh Canvas from JSON at every pause', () => {
  it('gives the same events and outputs for generated workflows and answers', async () => {
    let paused = 0;
    let withLoopForm = 0;
    let withModel = 0;
    let withReferences = 0;
    await fc.assert(
      fc.asyncProperty(
        workflowSpecArb,
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 12 }),
        async (spec, choices) => {
          const dsl = buildDsl(spec);
          const continuous = await drive(dsl, choices, 'continuous');
          const restored = await drive(dsl, choices, 'fresh');
          expect(restored.turns).toEqual(continuous.turns);
          expect(restored.finalState).toEqual(continuous.finalState);
          // every model call belongs to a node that finished: none is repeated on resume
          expect(restored.modelCalls).toBe(continuous.modelCalls);
          expect(continuous.modelCalls).toBe(continuous.modelNodes);
          // and every search belongs to a Retrieval that finished: none is made again either
          expect(restored.retrievals).toBe(continuous.retrievals);
          expect(continuous.retrievals).toBe(continuous.retrievalNodes);
          if (continuous.modelCalls > 0) withModel++;
          if (JSON.stringify(continuous.turns).includes('"reference"')) withReferences++;
          if (continuous.turns.length > 1) paused++;
          const text = JSON.stringify(spec);
          if (/"kind":"loop"[^\]]*"kind":"form"/.test(text)) withLoopForm++;
        },
      ),
      { seed: 20261130, numRuns: 150 },
    );
    // the generator must actually exercise pauses, and forms inside loops
    expect(paused).toBeGreaterThan(50);
    expect(withLoopForm).toBeGreaterThan(5);
    expect(withModel).toBeGreaterThan(40);
    expect(withReferences).toBeGreaterThan(20);
    // 150 generated conversations over a local model server: seconds alone, far more on a loaded
    // machine; a run cut short by a timeout would go on calling the server the next test counts
  }, 300_000);

  it.each(['form-intake', 'begin-required', 'loop-with-form', 'iteration', 'loop-exit', 'switch-and-or'])(
    'holds for the %s fixture',
    async (name) => {
      const dsl = fixture(name);
      const continuous = await drive(dsl, [1, 2, 0, 3, 0], 'continuous');
      const restored = await drive(dsl, [1, 2, 0, 3, 0], 'fresh');
      expect(restored).toEqual(continuous);
    },
  );
});

describe('exactness: a turn stopped at a checkpoint and finished in a fresh Canvas', () => {
  it('gives the same events, state and model calls as a turn that went on', async () => {
    let suspendedSomewhere = 0;
    await fc.assert(
      fc.asyncProperty(
        workflowSpecArb,
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 3 }),
        async (spec, choices, suspendEvery) => {
          const dsl = buildDsl(spec);
          const checkpointed = await drive(dsl, choices, 'checkpointed');
          const suspended = await drive(dsl, choices, { suspendEvery });
          expect(suspended.turns).toEqual(checkpointed.turns);
          expect(suspended.finalState).toEqual(checkpointed.finalState);
          // the batches before a checkpoint are not run again: no model call is repeated
          expect(suspended.modelCalls).toBe(checkpointed.modelCalls);
          expect(checkpointed.modelCalls).toBe(checkpointed.modelNodes);
          expect(suspended.retrievals).toBe(checkpointed.retrievals);
          expect(checkpointed.retrievals).toBe(checkpointed.retrievalNodes);
          expect(checkpointed.suspensions).toBe(0);
          if (suspended.suspensions > 0) suspendedSomewhere++;
        },
      ),
      { seed: 20261201, numRuns: 100 },
    );
    // the generated workflows must actually be stopped mid-turn, not only at their pauses
    expect(suspendedSomewhere).toBeGreaterThan(50);
  }, 300_000);

  it.each(['form-intake', 'loop-with-form', 'iteration', 'loop-exit', 'switch-and-or'])('holds for the %s fixture', async (name) => {
    const dsl = fixture(name);
    const checkpointed = await drive(dsl, [1, 2, 0, 3, 0], 'checkpointed');
    const suspended = await drive(dsl, [1, 2, 0, 3, 0], { suspendEvery: 1 });
    expect(suspended.suspensions).toBeGreaterThan(0);
    expect({ ...suspended, suspensions: 0 }).toEqual(checkpointed);
  });
});
