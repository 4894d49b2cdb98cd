/**
 * 3. Engine CPU vs LangGraph.js. The same 10-node linear graph with a human-input pause at
 * node 5, in @langchain/langgraph (interrupt() + Command({resume}), MemorySaver, default
 * durability) and in Easel (the bench workflow; at the pause the whole state is serialized,
 * turned into JSON text and loaded from it, as a real turn does; no DynamoDB). A pass is two
 * turns: the query runs nodes 1-4 and pauses, the answer resumes and runs nodes 5-10. Every pass
 * is a new run (LangGraph: a new thread, deleted afterwards outside the timing).
 */
import { Annotation, Command, END, interrupt, MemorySaver, START, StateGraph } from '@langchain/langgraph';
import { Canvas } from '../lib/canvas';
import { cpuMicros, fmt, heading, mean, median, p95, ratio, table, verdict } from './lib/stats';
import { benchWorkflow, turnInput } from './workflow';

export interface EngineCpuOptions {
  warmupTurns: number;
  turns: number;
  /** Turns per batch; engines alternate batch by batch. */
  batch: number;
}

export interface EngineStats {
  turns: number;
  cpuUsP50: number;
  cpuUsP95: number;
  /** Batch CPU / batch turns: includes work that finishes after a turn returns. */
  cpuUsBatchMean: number;
  wallUsP50: number;
}

export interface EngineCpuResult {
  langgraph: EngineStats;
  easel: EngineStats;
  /** LangGraph CPU per turn / Easel CPU per turn (medians). */
  ratio: number;
  batchMeanRatio: number;
}

interface Engine {
  name: string;
  /** Runs one pass (two turns) and pushes each turn's CPU and wall time. */
  pass(i: number, cpu: number[], wall: number[]): Promise<void>;
}

function langGraphEngine(): Engine {
  const State = Annotation.Root({
    query: Annotation<string>(),
    name: Annotation<string>(),
    plan: Annotation<string>(),
    vars: Annotation<Record<string, string>>({ reducer: (a, b) => ({ ...a, ...b }), default: () => ({}) }),
    messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  });
  type S = typeof State.State;
  // the same ten steps as the Easel workflow: assignments, three messages, the form at node 5
  const steps: [string, (s: S) => Partial<S>][] = [
    ['begin', () => ({ vars: { started: 'yes' } })],
    ['keep_query', (s) => ({ vars: { last_query: s.query } })],
    ['ack', (s) => ({ messages: [`You asked: ${s.query}. A few details, please.`] })],
    ['stamp', (s) => ({ vars: { stage: `asked ${s.vars.last_query}` } })],
    ['details', (s) => {
      const answer = interrupt({ tips: `Your name and plan for "${s.query}"` }) as { name: string; plan: string };
      return { name: answer.name, plan: answer.plan };
    }],
    ['keep_name', (s) => ({ vars: { name: s.name } })],
    ['thanks', (s) => ({ messages: [`Thanks ${s.vars.name}, plan ${s.plan}.`] })],
    ['note', (s) => ({ vars: { stage: `answered by ${s.vars.name}` } })],
    ['summary', (s) => ({ vars: { summary: `${s.vars.last_query} / ${s.vars.name}` } })],
    ['done', (s) => ({ messages: [`Done: ${s.vars.summary} (${s.vars.stage}).`] })],
  ];
  // StateGraph's builder types track node names literally; a loop needs the loose view
  const graph = new StateGraph(State) as unknown as {
    addNode(name: string, fn: (s: S) => Partial<S>): void;
    addEdge(from: string, to: string): void;
    compile(options: { checkpointer: MemorySaver }): { invoke(input: unknown, config: unknown): Promise<unknown> };
  };
  for (const [name, fn] of steps) graph.addNode(name, fn);
  graph.addEdge(START, steps[0]?.[0] as string);
  for (let i = 0; i + 1 < steps.length; i++) graph.addEdge(steps[i]?.[0] as string, steps[i + 1]?.[0] as string);
  graph.addEdge(steps[steps.length - 1]?.[0] as string, END);
  const saver = new MemorySaver();
  const app = graph.compile({ checkpointer: saver });
  return {
    name: 'LangGraph.js',
    async pass(i, cpu, wall) {
      const config = { configurable: { thread_id: `pass-${i}` } };
      const ask = turnInput(1).query as string;
      const answer = turnInput(2).inputs as { name: string; plan: string };
      let c = cpuMicros();
      let w = performance.now();
      const paused = (await app.invoke({ query: ask }, config)) as { __interrupt__?: unknown[] };
      cpu.push(cpuMicros() - c);
      wall.push((performance.now() - w) * 1000);
      if (!paused.__interrupt__?.length) throw new Error('LangGraph did not pause');
      c = cpuMicros();
      w = performance.now();
      const done = (await app.invoke(new Command({ resume: answer }), config)) as { messages: string[] };
      cpu.push(cpuMicros() - c);
      wall.push((performance.now() - w) * 1000);
      if (done.messages.length !== 3) throw new Error('LangGraph did not complete');
      await saver.deleteThread(`pass-${i}`);
    },
  };
}

function easelEngine(): Engine {
  const workflow = benchWorkflow();
  return {
    name: 'Easel',
    async pass(_i, cpu, wall) {
      let c = cpuMicros();
      let w = performance.now();
      const canvas = Canvas.create(workflow);
      for await (const e of canvas.run(turnInput(1))) void e;
      const saved = JSON.stringify(canvas.serialize());
      cpu.push(cpuMicros() - c);
      wall.push((performance.now() - w) * 1000);
      if (canvas.status !== 'waiting_for_input') throw new Error('Easel did not pause');
      c = cpuMicros();
      w = performance.now();
      const resumed = Canvas.restore(workflow, JSON.parse(saved));
      for await (const e of resumed.run(turnInput(2))) void e;
      const final = JSON.stringify(resumed.serialize());
      cpu.push(cpuMicros() - c);
      wall.push((performance.now() - w) * 1000);
      if (resumed.status !== 'completed' || final.length === 0) throw new Error('Easel did not complete');
    },
  };
}

export async function engineCpu(options: EngineCpuOptions): Promise<EngineCpuResult> {
  heading(
    '3. Engine CPU vs LangGraph.js',
    `10-node linear graph, pause at node 5; LangGraph: interrupt() + Command({resume}), MemorySaver, default durability; Easel: Canvas.run, then serialize -> JSON text -> parse -> Canvas.restore at the pause (no DynamoDB); ${options.warmupTurns} warm-up turns each, then ${options.turns} turns each in alternating batches of ${options.batch}; CPU per turn = process.cpuUsage() (user+system) around the turn, in one process.`,
  );
  const engines = [langGraphEngine(), easelEngine()];
  const samples = engines.map(() => ({ cpu: [] as number[], wall: [] as number[], batches: [] as number[] }));
  let pass = 0;
  for (const engine of engines) {
    const cpu: number[] = [];
    for (let t = 0; t < options.warmupTurns; t += 2) await engine.pass(pass++, cpu, []);
  }
  for (let done = 0; done < options.turns; done += options.batch) {
    for (const [i, engine] of engines.entries()) {
      const s = samples[i] as (typeof samples)[number];
      const before = cpuMicros();
      const count = Math.min(options.batch, options.turns - done);
      for (let t = 0; t < count; t += 2) await engine.pass(pass++, s.cpu, s.wall);
      s.batches.push((cpuMicros() - before) / count);
    }
  }
  const stats = samples.map((s): EngineStats => ({
    turns: s.cpu.length,
    cpuUsP50: median(s.cpu),
    cpuUsP95: p95(s.cpu),
    cpuUsBatchMean: mean(s.batches),
    wallUsP50: median(s.wall),
  }));
  const [langgraph, easel] = stats as [EngineStats, EngineStats];
  const rows = engines.map((e, i) => {
    const s = stats[i] as EngineStats;
    return [e.name, s.turns, s.cpuUsP50 / 1000, s.cpuUsP95 / 1000, s.cpuUsBatchMean / 1000, s.wallUsP50 / 1000];
  });
  rows.push(['LangGraph / Easel', '', ratio(langgraph.cpuUsP50, easel.cpuUsP50), ratio(langgraph.cpuUsP95, easel.cpuUsP95), ratio(langgraph.cpuUsBatchMean, easel.cpuUsBatchMean), ratio(langgraph.wallUsP50, easel.wallUsP50)]);
  table(['engine', 'turns', 'CPU p50 ms', 'CPU p95 ms', 'CPU batch mean ms', 'wall p50 ms'], rows.map((r) => r.map((v) => (typeof v === 'number' && !Number.isInteger(v) ? Number(v.toFixed(3)) : v))));
  const result: EngineCpuResult = {
    langgraph,
    easel,
    ratio: ratio(langgraph.cpuUsP50, easel.cpuUsP50),
    batchMeanRatio: ratio(langgraph.cpuUsBatchMean, easel.cpuUsBatchMean),
  };
  console.log(`target Easel >= 20x less CPU per turn: ${verdict(result.ratio, '>=', 20)} (batch means: x${fmt(result.batchMeanRatio)})`);
  return result;
}
