/**
 * 1. Turn overhead vs its own DynamoDB calls. Full turns over HTTP against the local stack,
 * each followed by a bare replay of exactly the DynamoDB calls it made (same kinds, same
 * items and sizes, on a mirror session), so the two are measured interleaved.
 */
import { ASSUMPTIONS } from './cost';
import { fmt, heading, mean, median, p95, ratio, table, verdict } from './lib/stats';
import { newTraceId, type Session, type Stack } from './lib/stack';

export interface TurnOverheadOptions {
  warmupSessions: number;
  sessions: number;
  turnsPerSession: number;
}

export interface TurnOverheadResult {
  turns: number;
  turnP50: number;
  turnP95: number;
  bareP50: number;
  bareP95: number;
  ratioP50: number;
  ratioP95: number;
  roundTripsPerTurn: number;
  /** Round trips of a turn that continues a run (not the first). */
  roundTripsSteady: number;
  operations: Record<string, number>;
  dynamoMsP50: number;
  /** CPU time of the server process per turn (µs). */
  cpuUsMean: number;
  cpuUsP50: number;
  /** CPU time of the same process replaying the turn's calls bare (µs). */
  bareCpuUsP50: number;
  /** Components run per turn (node_started events). */
  componentsPerTurn: number;
  /** Bytes of log lines (request log + EMF metrics) per turn. */
  logBytesPerTurn: number;
  replayFailures: number;
  errors: number;
}

interface Sample {
  kind: 'first' | 'pause' | 'answer';
  turnMs: number;
  bareMs: number;
  bareCpuUs: number;
  trace: string;
  components: number;
}

export async function turnOverhead(stack: Stack, options: TurnOverheadOptions): Promise<TurnOverheadResult> {
  heading(
    '1. Turn overhead vs its own DynamoDB calls',
    `${options.sessions} conversations x ${options.turnsPerSession} turns over HTTP (10-node workflow, form at node 5; odd turns pause, even turns answer and complete) against the local stack (bench/stack-server.ts: the Lambda entry points' wiring served by @hono/node-server, in its own process), each turn followed by a bare replay of its recorded DynamoDB calls (same commands and item sizes, mirror session, same client); ${options.warmupSessions} conversations of warm-up; latency = client-side wall time of the HTTP turn vs the replayed call sequence.`,
  );
  let errors = 0;
  let replayFailures = 0;
  const run = async (sessions: number, measured: Sample[] | null) => {
    for (let s = 0; s < sessions; s++) {
      const session: Session = { done: 0 };
      for (let k = 1; k <= options.turnsPerSession; k++) {
        const trace = newTraceId();
        const out = await stack.turn(session, trace);
        if (out.status !== 200) {
          errors++;
          throw new Error(`turn ${k} answered ${out.status}: ${JSON.stringify(out.body).slice(0, 300)}`);
        }
        const bare = await stack.replay(trace);
        replayFailures += bare.failures;
        const components = (out.body.events as { event: string }[]).filter((e) => e.event === 'node_started').length;
        measured?.push({ kind: k === 1 ? 'first' : k % 2 === 1 ? 'pause' : 'answer', turnMs: out.ms, bareMs: bare.ms, bareCpuUs: bare.cpuUs, trace, components });
        if (!measured) await stack.forget([trace]);
      }
    }
  };
  await run(options.warmupSessions, null);
  const samples: Sample[] = [];
  const logsBefore = stack.logBytes();
  await run(options.sessions, samples);
  await new Promise((r) => setTimeout(r, 100)); // let the last log lines arrive
  const logBytesPerTurn = (stack.logBytes() - logsBefore) / samples.length;
  const summaries = await stack.summaries(samples.map((s) => s.trace));
  await stack.forget(samples.map((s) => s.trace));

  const rows: (string | number)[][] = [];
  const groups: [string, Sample[]][] = [
    ['all turns', samples],
    ['first turn (creates the run)', samples.filter((s) => s.kind === 'first')],
    ['query -> pause at the form', samples.filter((s) => s.kind === 'pause')],
    ['form answer -> completed', samples.filter((s) => s.kind === 'answer')],
  ];
  for (const [name, group] of groups) {
    if (group.length === 0) continue;
    const t = group.map((s) => s.turnMs);
    const b = group.map((s) => s.bareMs);
    const trips = group.map((s) => (summaries[samples.indexOf(s)] as { operations: string[] }).operations.length);
    rows.push([name, group.length, median(t), median(b), ratio(median(t), median(b)), p95(t), p95(b), ratio(p95(t), p95(b)), mean(trips)]);
  }
  table(['turns', 'n', 'turn p50 ms', 'bare p50 ms', 'p50 ratio', 'turn p95 ms', 'bare p95 ms', 'p95 ratio', 'round trips'], rows);

  const operations: Record<string, number> = {};
  for (const s of summaries) for (const op of s.operations) operations[op] = (operations[op] ?? 0) + 1 / summaries.length;
  const steady = samples.map((s, i) => ({ s, sum: summaries[i] as (typeof summaries)[number] })).filter(({ s }) => s.kind !== 'first');
  const turnP50 = median(samples.map((s) => s.turnMs));
  const bareP50 = median(samples.map((s) => s.bareMs));
  const turnP95 = p95(samples.map((s) => s.turnMs));
  const bareP95 = p95(samples.map((s) => s.bareMs));
  const result: TurnOverheadResult = {
    turns: samples.length,
    turnP50,
    turnP95,
    bareP50,
    bareP95,
    ratioP50: ratio(turnP50, bareP50),
    ratioP95: ratio(turnP95, bareP95),
    roundTripsPerTurn: mean(summaries.map((s) => s.operations.length)),
    roundTripsSteady: mean(steady.map(({ sum }) => sum.operations.length)),
    operations,
    dynamoMsP50: median(summaries.map((s) => s.dynamoMs)),
    cpuUsMean: mean(summaries.map((s) => s.cpuUs)),
    cpuUsP50: median(summaries.map((s) => s.cpuUs)),
    bareCpuUsP50: median(samples.map((s) => s.bareCpuUs)),
    componentsPerTurn: mean(samples.map((s) => s.components)),
    logBytesPerTurn,
    replayFailures,
    errors,
  };
  const ops = Object.entries(operations).map(([op, n]) => `${op} x${n.toFixed(2)}`).join(', ');
  console.log(`round trips per turn: ${result.roundTripsPerTurn.toFixed(2)} (continuing turns ${result.roundTripsSteady.toFixed(2)}; ${ops})`);
  console.log(`inside the turn: ${result.dynamoMsP50.toFixed(2)} ms p50 waiting for DynamoDB; server CPU ${(result.cpuUsP50 / 1000).toFixed(2)} ms p50, ${(result.cpuUsMean / 1000).toFixed(2)} ms mean per turn (its bare calls: ${(result.bareCpuUsP50 / 1000).toFixed(2)} ms p50); ${result.componentsPerTurn.toFixed(1)} components per turn; ${result.logBytesPerTurn.toFixed(0)} log bytes per turn`);
  console.log(`replayed calls refused on the mirror: ${replayFailures}`);
  const extra = turnP50 - bareP50;
  const awsCalls = result.roundTripsPerTurn * ASSUMPTIONS.dynamoLatencyMs;
  console.log(`derived: the turn adds ${fmt(extra)} ms (p50) to its calls; were each call ${ASSUMPTIONS.dynamoLatencyMs} ms as on AWS (the assumption of 6), the p50 ratio would be ${fmt((awsCalls + extra) / awsCalls)}`);
  console.log(`p50 ratio target <= 1.15: ${verdict(result.ratioP50, '<=', 1.15)}; p95 ratio ${result.ratioP95.toFixed(2)}`);
  return result;
}
