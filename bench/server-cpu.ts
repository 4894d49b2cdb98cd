/**
 * 5. Throughput. Many sessions at once against the local stack, then exactly the DynamoDB
 * calls those turns made, replayed by the server process with the same concurrency (on mirror
 * sessions). The two alternate turn by turn: every session runs turn k through the stack, then
 * every session's turn-k calls are replayed, then turn k+1, so background load on a shared
 * machine hits both alike. Afterwards every session and mirror is read back: every turn
 * committed, the head at the last turn.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { cpuMicros, heading, p95, ratio, table, verdict } from './lib/stats';
import { type Database, newTraceId, type Session, sessionItems, type Stack } from './lib/stack';
import { mirrorId } from './lib/recorder';

export interface ThroughputOptions {
  sessions: number;
  turnsPerSession: number;
}

export interface ThroughputResult {
  turns: number;
  stackTurnsPerSec: number;
  stackP95: number;
  directTurnsPerSec: number;
  directP95: number;
  ratio: number;
  /** CPU per turn (ms) of each process, stack steps vs replay steps; NaN where unknown. */
  cpuPerTurn: { server: number; client: number; dynamodb: number; directServer: number; directDynamodb: number };
  conflicts: number;
  errors: number;
  lost: number;
  replayFailures: number;
}

/** CPU time (ms) of the process listening with `-port <port>` (DynamoDB Local), from /proc. */
function dynamoCpu(endpoint: string): () => number {
  const port = new URL(endpoint).port;
  let pid: string | undefined;
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
        if (args.some((a) => a.endsWith('DynamoDBLocal.jar')) && args[args.indexOf('-port') + 1] === port) pid = entry;
      } catch {
        // gone
      }
    }
  } catch {
    // no /proc
  }
  return () => {
    if (!pid) return Number.NaN;
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime + stime, USER_HZ ticks
    } catch {
      return Number.NaN;
    }
  };
}

export async function throughput(db: Database, stack: Stack, options: ThroughputOptions): Promise<ThroughputResult> {
  const { sessions, turnsPerSession: turns } = options;
  heading(
    '5. Throughput',
    `${sessions} concurrent sessions x ${turns} turns over HTTP against the local stack (one server process, one DynamoDB); after each turn of all sessions, the DynamoDB calls of those turns replayed directly by the server process with the same concurrency (each session's calls in order, mirror sessions); turns/s = turns / summed wall time of the steps; p95 = per-turn latency (replay: the turn's call sequence); afterwards every session and mirror is read back; CPU per turn from process.cpuUsage() and /proc.`,
  );
  let conflicts = 0;
  let errors = 0;
  let lost = 0;
  let replayFailures = 0;
  let stackMs = 0;
  let directMs = 0;
  const stackLatencies: number[] = [];
  const directLatencies: number[] = [];
  const cpu = { server: 0, client: 0, dynamodb: 0, directServer: 0, directDynamodb: 0 };
  const dynamo = dynamoCpu(db.endpoint);
  const states: Session[] = Array.from({ length: sessions }, () => ({ done: 0 }));
  const rows: (string | number)[][] = [];
  for (let k = 1; k <= turns; k++) {
    const traces = states.map(() => newTraceId());
    const server0 = await stack.cpu();
    const client0 = cpuMicros();
    const dynamo0 = dynamo();
    const started = performance.now();
    const ok = await Promise.all(states.map(async (session, i) => {
      if (session.done !== k - 1) return false; // it failed earlier: counted then
      const out = await stack.turn(session, traces[i] as string);
      stackLatencies.push(out.ms);
      if (out.status === 409) conflicts++;
      else if (out.status !== 200) errors++;
      return out.status === 200;
    }));
    const stepMs = performance.now() - started;
    stackMs += stepMs;
    cpu.server += (await stack.cpu()) - server0;
    cpu.client += cpuMicros() - client0;
    const dynamo1 = dynamo();
    cpu.dynamodb += dynamo1 - dynamo0;
    const server1 = await stack.cpu();
    const direct = await stack.replaySessions(traces.filter((_, i) => ok[i]).map((t) => [t]));
    cpu.directServer += (await stack.cpu()) - server1;
    cpu.directDynamodb += dynamo() - dynamo1;
    directMs += direct.ms;
    directLatencies.push(...direct.latencies);
    replayFailures += direct.failures;
    await stack.forget(traces);
    if (k === 1 || k === turns || k % Math.max(1, Math.round(turns / 4)) === 0) {
      rows.push([`turn ${k}`, sessions, (sessions / stepMs) * 1000, (sessions / direct.ms) * 1000, ratio(direct.ms, stepMs)]);
    }
  }
  // every turn committed, on each session and on its mirror
  for (const s of states) {
    if (!s.runId) {
      lost += turns;
      continue;
    }
    for (const id of [s.runId, mirrorId(s.runId)]) {
      const found = await sessionItems(db, stack.tenant, id);
      lost += Math.max(0, turns - found.turns) + (found.headTurn === turns ? 0 : 1);
    }
  }
  const total = sessions * turns;
  const stackTps = (total / stackMs) * 1000;
  const directTps = (total / directMs) * 1000;
  rows.push(['all', total, stackTps, directTps, ratio(stackTps, directTps)]);
  table(['step', 'turns', 'stack turns/s', 'direct turns/s', 'ratio'], rows);
  const result: ThroughputResult = {
    turns: total,
    stackTurnsPerSec: stackTps,
    stackP95: p95(stackLatencies),
    directTurnsPerSec: directTps,
    directP95: p95(directLatencies),
    ratio: ratio(stackTps, directTps),
    cpuPerTurn: {
      server: cpu.server / 1000 / total,
      client: cpu.client / 1000 / total,
      dynamodb: cpu.dynamodb / total,
      directServer: cpu.directServer / 1000 / total,
      directDynamodb: cpu.directDynamodb / total,
    },
    conflicts,
    errors,
    lost,
    replayFailures,
  };
  const c = result.cpuPerTurn;
  table(
    ['', 'turns/s', 'p95 ms', 'server CPU ms/turn', 'DynamoDB Local CPU ms/turn', 'client CPU ms/turn'],
    [
      ['stack (HTTP turns)', stackTps, result.stackP95, c.server, c.dynamodb, c.client],
      ['direct (bare calls)', directTps, result.directP95, c.directServer, c.directDynamodb, '-'],
    ],
  );
  console.log(`conflicts (409): ${conflicts}; other errors: ${errors}; turns lost (missing records or heads behind, sessions + mirrors): ${lost}; replayed calls refused: ${replayFailures}`);
  console.log(`target ratio >= 0.8: ${verdict(result.ratio, '>=', 0.8)}; zero conflicts and losses: ${conflicts + errors + lost === 0 ? 'met' : 'MISSED'}`);
  return result;
}
