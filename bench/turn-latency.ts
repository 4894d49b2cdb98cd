/**
 * 1. Turn latency against the ideal protocol. Full turns over HTTP against the local stack,
 * each followed by the ideal protocol of the same turn — one consistent Query and one
 * conditional Put of the items the turn read and wrote, issued bare by the server process's
 * own SDK client on a mirror session (bench/lib/recorder.ts `prepareIdeal`) — so the two are
 * measured interleaved and background load hits both alike. Side by side: with DynamoDB Local
 * as it is (~1.5 ms a call on loopback), and behind a proxy that adds AWS's network latency to
 * every round trip (bench/lib/latency-proxy.ts), both wired as the streaming Function URL entry
 * is (the run's listing written after the response); and behind the proxy wired as API
 * Gateway's buffered entry is (the listing before it). Conversations alternate between them.
 */
import { simulationLabel } from './lib/latency-proxy';
import { fmt, heading, mean, median, p95, ratio, table, verdict } from './lib/stats';
import { newTraceId, type Session, type Stack } from './lib/stack';
import type { TraceSummary } from './stack-server';

export interface TurnLatencyOptions {
  warmupSessions: number;
  sessions: number;
  turnsPerSession: number;
}

/**
 * A stack server: on DynamoDB Local itself (`local`) or behind the proxy (`simulated`), as the
 * streaming entry serves turns; `simulatedBuffered`: behind the proxy, as the buffered one does.
 */
export interface LatencyMode {
  name: 'local' | 'simulated' | 'simulatedBuffered';
  stack: Stack;
}

const LABELS: Record<LatencyMode['name'], (delayMs: number) => string> = {
  local: () => 'DynamoDB Local as it is, streaming entry',
  simulated: (delayMs) => `${simulationLabel(delayMs)}, streaming entry`,
  simulatedBuffered: (delayMs) => `${simulationLabel(delayMs)}, buffered entry (API Gateway)`,
};

export interface LatencyFigures {
  turns: number;
  turnP50: number;
  turnP95: number;
  idealP50: number;
  idealP95: number;
  ratioP50: number;
  ratioP95: number;
  roundTrips: number;
  /** Waiting for DynamoDB inside the turn (sum of its calls), p50. */
  dynamoMsP50: number;
  /** Latency of the calls a turn makes beyond the ideal's two (a head update), p50 of their sum. */
  beyondIdealMsP50: number;
  /** Server CPU per turn (µs), p50. */
  cpuUsP50: number;
}

export interface TurnLatencyResult {
  /** The delay the proxy adds to every round trip in the simulated mode. */
  delayMs: number;
  local: LatencyFigures;
  simulated: LatencyFigures;
  simulatedBuffered: LatencyFigures;
  /** Mean count per turn of each DynamoDB operation (both modes make the same calls). */
  operations: Record<string, number>;
  componentsPerTurn: number;
  idealFailures: number;
}

interface Sample {
  kind: 'first' | 'pause' | 'answer';
  turnMs: number;
  idealMs: number;
  trace: string;
  components: number;
  summary?: TraceSummary;
}

/** Latency of the calls beyond the turn's first Query and its last write (the ideal's two). */
function beyondIdealMs(summary: TraceSummary): number {
  const query = summary.operations.indexOf('Query');
  const commit = Math.max(summary.operations.lastIndexOf('PutItem'), summary.operations.lastIndexOf('TransactWrite'));
  return summary.callMs.reduce((sum, ms, i) => (i === query || i === commit ? sum : sum + ms), 0);
}

function figures(samples: Sample[]): LatencyFigures {
  const turn = samples.map((s) => s.turnMs);
  const ideal = samples.map((s) => s.idealMs);
  const summaries = samples.map((s) => s.summary as TraceSummary);
  return {
    turns: samples.length,
    turnP50: median(turn),
    turnP95: p95(turn),
    idealP50: median(ideal),
    idealP95: p95(ideal),
    ratioP50: ratio(median(turn), median(ideal)),
    ratioP95: ratio(p95(turn), p95(ideal)),
    roundTrips: mean(summaries.map((s) => s.operations.length)),
    dynamoMsP50: median(summaries.map((s) => s.dynamoMs)),
    beyondIdealMsP50: median(summaries.map(beyondIdealMs)),
    cpuUsP50: median(summaries.map((s) => s.cpuUs)),
  };
}

export async function turnLatency(modes: [LatencyMode, LatencyMode, LatencyMode], delayMs: number, options: TurnLatencyOptions): Promise<TurnLatencyResult> {
  heading(
    '1. Turn latency against the ideal protocol',
    `${options.sessions} conversations x ${options.turnsPerSession} turns over HTTP (10-node workflow, form at node 5; odd turns pause, even turns answer and complete) against each of three local stacks (bench/stack-server.ts: the Lambda entry points' wiring served by @hono/node-server, each in its own process): as the streaming Function URL entry serves turns (the run's listing written after the response), one on DynamoDB Local as it is and one on DynamoDB Local behind a TCP proxy adding ${delayMs} ms to every round trip (bench/lib/latency-proxy.ts: a simulation of AWS's network latency, not AWS); and behind the proxy as API Gateway's buffered entry serves them (the listing before the response); conversations alternate between them; each turn followed by its ideal protocol (one consistent Query + one conditional Put of the turn's own items and sizes, on a mirror session, issued bare by the same server process's SDK client); ${options.warmupSessions} conversations of warm-up on each; latency = client-side wall time of the HTTP turn vs the two calls.`,
  );
  let idealFailures = 0;
  const samples = new Map<LatencyMode['name'], Sample[]>(modes.map((m) => [m.name, []]));
  const converse = async ({ stack }: LatencyMode, measured: Sample[] | null) => {
    const session: Session = { done: 0 };
    const traces: string[] = [];
    for (let k = 1; k <= options.turnsPerSession; k++) {
      const trace = newTraceId();
      traces.push(trace);
      const out = await stack.turn(session, trace);
      if (out.status !== 200) throw new Error(`turn ${k} answered ${out.status}: ${JSON.stringify(out.body).slice(0, 300)}`);
      const ideal = await stack.ideal(trace);
      idealFailures += ideal.failures;
      const components = (out.body.events as { event: string }[]).filter((e) => e.event === 'node_started').length;
      measured?.push({ kind: k === 1 ? 'first' : k % 2 === 1 ? 'pause' : 'answer', turnMs: out.ms, idealMs: ideal.ms, trace, components });
    }
    if (measured) {
      const summaries = await stack.summaries(traces);
      measured.slice(-traces.length).forEach((s, i) => (s.summary = summaries[i]));
    }
    await stack.forget(traces);
  };
  for (let s = 0; s < options.warmupSessions + options.sessions; s++) {
    // each mode goes first in turn
    const order = modes.map((_, i) => modes[(i + s) % modes.length] as LatencyMode);
    for (const mode of order) {
      await converse(mode, s < options.warmupSessions ? null : (samples.get(mode.name) as Sample[]));
    }
  }

  const rows: (string | number)[][] = [];
  for (const mode of modes) {
    const all = samples.get(mode.name) as Sample[];
    const groups: [string, Sample[]][] = [
      ['all turns', all],
      ['first turn (creates the run)', all.filter((s) => s.kind === 'first')],
      ['query -> pause at the form', all.filter((s) => s.kind === 'pause')],
      ['form answer -> completed', all.filter((s) => s.kind === 'answer')],
    ];
    const label = LABELS[mode.name](delayMs);
    for (const [name, group] of groups) {
      if (group.length === 0) continue;
      const f = figures(group);
      rows.push([label, name, f.turns, f.turnP50, f.idealP50, f.ratioP50, f.turnP95, f.idealP95, f.ratioP95, f.roundTrips]);
    }
  }
  table(['DynamoDB', 'turns', 'n', 'turn p50 ms', 'ideal p50 ms', 'p50 ratio', 'turn p95 ms', 'ideal p95 ms', 'p95 ratio', 'round trips'], rows);

  const simulatedSamples = samples.get('simulated') as Sample[];
  const operations: Record<string, number> = {};
  for (const s of simulatedSamples) for (const op of (s.summary as TraceSummary).operations) operations[op] = (operations[op] ?? 0) + 1 / simulatedSamples.length;
  const result: TurnLatencyResult = {
    delayMs,
    local: figures(samples.get('local') as Sample[]),
    simulated: figures(simulatedSamples),
    simulatedBuffered: figures(samples.get('simulatedBuffered') as Sample[]),
    operations,
    componentsPerTurn: mean(simulatedSamples.map((s) => s.components)),
    idealFailures,
  };
  const ops = Object.entries(operations).map(([op, n]) => `${op} x${n.toFixed(2)}`).join(', ');
  console.log(`round trips per turn: ${fmt(result.simulated.roundTrips)} (${ops}; the same on each, the streaming entry's listing update after the response); the ideal: 2 (Query, PutItem); ideal calls refused on the mirror: ${idealFailures}`);
  for (const mode of modes) {
    const f = result[mode.name];
    const extra = f.turnP50 - f.idealP50;
    console.log(
      `${LABELS[mode.name](delayMs)}: the turn takes ${fmt(extra)} ms more than the ideal (p50); inside it, ${fmt(f.dynamoMsP50)} ms waiting for DynamoDB, of which ${fmt(f.beyondIdealMsP50)} ms for the calls beyond the ideal's two; server CPU ${fmt(f.cpuUsP50 / 1000)} ms per turn (p50)`,
    );
  }
  console.log(`targets: p50 ratio <= 1.3 on the ${simulationLabel(delayMs)}, streaming entry: ${verdict(result.simulated.ratioP50, '<=', 1.3)} (p95 ${fmt(result.simulated.ratioP95)}); buffered entry: p50 ${fmt(result.simulatedBuffered.ratioP50)} (reported); DynamoDB Local as it is: p50 ${fmt(result.local.ratioP50)}, p95 ${fmt(result.local.ratioP95)} (reported)`);
  return result;
}
