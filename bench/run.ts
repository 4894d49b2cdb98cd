/**
 * `npm run bench [-- --quick]`: every measurement of BENCHMARKS.md in one run on one machine,
 * each printing its method and a table; ratios are measured side by side in the same run.
 * Writes bench/results.json. `--quick` uses tiny counts (a smoke test: `npm test` runs it).
 * Exit code 1 when something failed outright (an error, a lost or conflicting turn); missed
 * targets are reported, not failures.
 *
 * Options: --quick; --only=1,3,... (a subset; results.json then has only their keys);
 * EASEL_DYNAMODB_ENDPOINT=<url> to measure against that DynamoDB instead of launching
 * DynamoDB Local; BENCH_PROFILE=<dir> to write CPU profiles of the processes measured by 1 and 5
 * (the stack servers, the Lambda handler's driver), summarised at the end.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { coldFirstRequest, coldStart, type ColdStartResult, type ColdStartRun } from './cold-start';
import { cost, type CostResult } from './cost';
import { engineCpu, type EngineCpuResult } from './engine-cpu';
import { knowledgeIndex, type KnowledgeIndexResult } from './knowledge';
import { type LatencyProxy, SIMULATED_NETWORK_DELAY_MS, simulationLabel, startLatencyProxy } from './lib/latency-proxy';
import { describeMachine } from './lib/machine';
import { reportProfile } from './lib/profile';
import { type Database, openDatabase, type Stack, startStack } from './lib/stack';
import { fmt, table } from './lib/stats';
import { serverCpu, type ServerCpuResult } from './server-cpu';
import { turnLatency, type TurnLatencyResult } from './turn-latency';
import { writeCost, type WriteCostResult } from './write-cost';
import { MAX_CHUNKS_PER_KB } from '../lib/knowledge/limits';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const args = process.argv.slice(2);
const unknown = args.filter((a) => a !== '--quick' && !a.startsWith('--only='));
if (unknown.length > 0) {
  console.error(`unknown argument ${unknown.join(' ')}; usage: npm run bench [-- --quick] [-- --only=1,2,3,4,5,6,7]`);
  process.exit(2);
}
const quick = args.includes('--quick');
const only = new Set((args.find((a) => a.startsWith('--only='))?.slice(7) ?? '1,2,3,4,5,6,7').split(',').map(Number));

const SIZES = quick
  ? {
      coldStart: { reps: 2, firstRequestReps: 1 },
      engineCpu: { warmupTurns: 40, turns: 200, batch: 50 },
      turnLatency: { warmupSessions: 0, sessions: 1, turnsPerSession: 4 },
      writeCost: { turnsPerKind: 3, conversationTurns: 4, growthTurns: 10, quotaTurns: 3 },
      serverCpu: { warmupSessions: 0, sessions: 1, turnsPerSession: 4 },
      knowledgeIndex: { chunks: 100, queries: 10, warmupQueries: 2, dimensions: 256 },
    }
  : {
      coldStart: { reps: 20, firstRequestReps: 15 },
      engineCpu: { warmupTurns: 200, turns: 2000, batch: 100 },
      turnLatency: { warmupSessions: 2, sessions: 30, turnsPerSession: 20 },
      writeCost: { turnsPerKind: 20, conversationTurns: 20, growthTurns: 200, quotaTurns: 20 },
      serverCpu: { warmupSessions: 3, sessions: 30, turnsPerSession: 20 },
      // the local backend's limit: MAX_CHUNKS_PER_KB (lib/knowledge/limits.ts)
      knowledgeIndex: { chunks: MAX_CHUNKS_PER_KB, queries: 300, warmupQueries: 30, dimensions: 1536 },
    };

async function main(): Promise<number> {
  const began = performance.now();
  const machine = describeMachine();
  const date = new Date().toISOString();
  console.log(`# Easel benchmarks${quick ? ' (--quick: tiny counts, figures not meaningful)' : ''}`);
  console.log(`${date}; ${machine.cpus} CPUs (${machine.cpuModel}), ${machine.memoryGb} GB, ${machine.os}, Node ${machine.node}, ${machine.java}; load average ${machine.loadAverage} at start; commit ${machine.commit}`);

  let cold: ColdStartResult | undefined;
  let cpu: EngineCpuResult | undefined;
  let latency: TurnLatencyResult | undefined;
  let writes: WriteCostResult | undefined;
  let handlerCpu: ServerCpuResult | undefined;
  let dollars: CostResult | undefined;
  let knowledge: KnowledgeIndexResult | undefined;
  let failed = false;

  const seconds: Record<string, number> = {};
  /** Runs one step and notes how long it took (for the summary and results.json). */
  const timed = async <T>(name: string, step: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      return await step();
    } finally {
      seconds[name] = Math.round((performance.now() - started) / 100) / 10;
    }
  };

  // no DynamoDB yet: nothing of ours runs beside these three
  let coldRun: ColdStartRun | undefined;
  if (only.has(4)) {
    coldRun = await timed('4', () => coldStart(SIZES.coldStart));
    cold = coldRun.result;
  }
  if (only.has(3)) cpu = await timed('3', () => engineCpu(SIZES.engineCpu));
  if (only.has(7)) knowledge = await timed('7', () => knowledgeIndex(SIZES.knowledgeIndex));

  let db: Database | undefined;
  let proxy: LatencyProxy | undefined;
  const stacks: Stack[] = [];
  try {
    if ([1, 2, 4, 5, 6].some((m) => only.has(m))) {
      db = await timed('DynamoDB', () => openDatabase());
      console.log(`\nDynamoDB: ${db.description}, table ${db.table}`);
    }
    // a cold start with its first request needs DynamoDB: after the inits above, alone
    if (db && coldRun) await timed('4, first request', () => coldFirstRequest(coldRun, db as Database, SIZES.coldStart.firstRequestReps));
    if (db && only.has(1)) {
      const database = db;
      // two servers side by side: on DynamoDB as it is, and behind a simulation of AWS's network latency
      proxy = await startLatencyProxy({ target: database.endpoint, delayMs: SIMULATED_NETWORK_DELAY_MS });
      const via = proxy.url;
      // each as the streaming Function URL serves turns, and one more as API Gateway's buffered entry does
      const started = await timed('stack servers', () => Promise.allSettled([
        startStack(database, { name: 'stack-local', entry: 'stream' }),
        startStack(database, { endpoint: via, name: 'stack-simulated', entry: 'stream' }),
        startStack(database, { endpoint: via, name: 'stack-simulated-buffered', entry: 'buffered' }),
      ]));
      for (const s of started) if (s.status === 'fulfilled') stacks.push(s.value);
      const refused = started.find((s) => s.status === 'rejected');
      if (refused) throw refused.reason;
      const [local, simulated, simulatedBuffered] = stacks as [Stack, Stack, Stack];
      latency = await timed('1', () => turnLatency([
        { name: 'local', stack: local },
        { name: 'simulated', stack: simulated },
        { name: 'simulatedBuffered', stack: simulatedBuffered },
      ], SIMULATED_NETWORK_DELAY_MS, SIZES.turnLatency));
      if (latency.idealFailures > 0) failed = true;
    }
    if (db && (only.has(2) || only.has(6))) writes = await timed('2', () => writeCost(db as Database, SIZES.writeCost));
    if (db && (only.has(5) || only.has(6))) {
      handlerCpu = await timed('5', () => serverCpu(db as Database, SIZES.serverCpu));
      if (handlerCpu.lost + handlerCpu.replayFailures > 0) failed = true;
    }
  } finally {
    await Promise.all(stacks.map((s) => s.close()));
    await proxy?.close();
    await db?.stop();
    await coldRun?.dispose();
  }
  if (process.env.BENCH_PROFILE) {
    const profiled = [['stack-local', 'stack server (DynamoDB Local as it is)'], ['stack-simulated', `stack server (${simulationLabel()})`], ['stack-simulated-buffered', `stack server (${simulationLabel()}, buffered entry)`], ['lambda', 'Lambda handler driver']] as const;
    for (const [dir, label] of profiled) reportProfile(join(process.env.BENCH_PROFILE, dir), label);
  }
  if (only.has(6) && writes && handlerCpu) {
    const { conversation, keyedConversation } = writes.protocol;
    const base = { cpuMsPerTurn: handlerCpu.handlerCpuMsMean, logBytesPerTurn: handlerCpu.logBytesPerTurn };
    const shape = { componentsPerTurn: handlerCpu.componentsPerTurn, completedPerTurn: handlerCpu.completedPerTurn, turnsPerConversation: conversation.turns };
    // the provider's memorySize in serverless.yml, for one more line
    const deployed = Number(/^\s+memorySize:\s*(\d+)/m.exec(readFileSync(new URL('../serverless.yml', import.meta.url), 'utf8'))?.[1]) || undefined;
    dollars = cost(
      // the cleanup's deletes when the session expires, amortized over its turns, are part of a turn's bill
      { ...base, wcuPerTurn: conversation.wruWithCleanup, rcuPerTurn: conversation.rru, roundTripsPerTurn: conversation.roundTrips },
      { ...base, wcuPerTurn: keyedConversation.wruWithCleanup, rcuPerTurn: keyedConversation.rru, roundTripsPerTurn: keyedConversation.roundTrips },
      shape,
      deployed,
      // the plain turn plus what quotas added to the same turns
      {
        ...base,
        wcuPerTurn: conversation.wruWithCleanup + writes.quotas.extraWcu,
        rcuPerTurn: conversation.rru + writes.quotas.extraRcu,
        roundTripsPerTurn: conversation.roundTrips + writes.quotas.extraRoundTrips,
      },
    );
  }

  const results: Record<string, unknown> = {
    date,
    machine,
    quick,
    ...(latency ? { ideal_ratio_p50_simulated: latency.simulated.ratioP50, ideal_ratio_p50_local: latency.local.ratioP50, ideal_ratio_p50_simulated_buffered: latency.simulatedBuffered.ratioP50 } : {}),
    ...(writes
      ? {
          round_trips_pure: writes.protocol.roundTripsPure,
          round_trips_external: writes.protocol.roundTripsExternal,
          round_trips_keyed_extra: writes.protocol.roundTripsKeyedExtra,
          async_turn_wru: writes.protocol.asyncTurnWru,
          cleanup_wru_per_turn: writes.protocol.conversation.cleanupWruPerTurn,
          write_growth_ratio: writes.growthRatio,
          ragflow_write_growth_ratio: writes.ragflowGrowth,
          quota_extra_round_trips_per_turn: writes.quotas.extraRoundTrips,
          quota_extra_wru_per_turn: writes.quotas.extraWcu,
          quota_extra_rru_per_turn: writes.quotas.extraRcu,
          quota_turn_wru: writes.quotas.meanWcu,
        }
      : {}),
    ...(handlerCpu ? { cpu_ratio_vs_sdk: handlerCpu.ratio } : {}),
    ...(cpu ? { cpu_ratio_vs_langgraph: cpu.ratio } : {}),
    ...(cold ? { init_kb_over_floor_max: cold.initKbOverFloorMax, init_ratio_vs_floor_max: cold.initRatioMax } : {}),
    ...(cold?.firstRequest ? { cold_first_request_ratio_vs_floor: cold.firstRequest.ratio } : {}),
    ...(dollars ? { usd_per_million_turns: dollars.usdPerMillionTurns, usd_per_million_turns_keyed: dollars.usdPerMillionTurnsKeyed } : {}),
    ...(dollars?.usdPerMillionTurnsWithQuotas !== undefined ? { usd_per_million_turns_with_quotas: dollars.usdPerMillionTurnsWithQuotas } : {}),
    ...(knowledge
      ? {
          knowledge_chunks: knowledge.chunks,
          knowledge_build_s: knowledge.fullText.buildMs / 1000,
          knowledge_serialized_mb: knowledge.fullText.serializedMb,
          knowledge_load_ms: knowledge.fullText.loadMs,
          knowledge_query_p50_ms: knowledge.fullText.queryP50Ms,
          knowledge_query_p95_ms: knowledge.fullText.queryP95Ms,
          knowledge_hybrid_build_s: knowledge.hybrid.buildMs / 1000,
          knowledge_hybrid_serialized_mb: knowledge.hybrid.serializedMb,
          knowledge_hybrid_load_ms: knowledge.hybrid.loadMs,
          knowledge_hybrid_query_p50_ms: knowledge.hybrid.queryP50Ms,
          knowledge_hybrid_query_p95_ms: knowledge.hybrid.queryP95Ms,
        }
      : {}),
    duration_s: (performance.now() - began) / 1000,
    step_seconds: seconds,
    details: { turnLatency: latency, writeCost: writes, engineCpu: cpu, coldStart: cold, serverCpu: handlerCpu, cost: dollars, knowledgeIndex: knowledge },
  };
  const out = fileURLToPath(new URL('results.json', import.meta.url));
  writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);

  console.log('\n## Summary');
  const row = (name: string, value: number | undefined, target: string, ok: ((v: number) => boolean) | null): (string | number)[] =>
    value === undefined ? [name, '-', target, 'not run'] : [name, Number(value.toFixed(2)), target, ok === null ? '' : ok(value) ? 'met' : 'MISSED'];
  table(['measure', 'value', 'target', ''], [
    row(`1. turn / ideal protocol, p50, ${simulationLabel()}`, latency?.simulated.ratioP50, '<= 1.3', (v) => v <= 1.3),
    row(`1. turn / ideal protocol, p95, ${simulationLabel()}`, latency?.simulated.ratioP95, '', null),
    row(`1. the same behind API Gateway's buffered entry (the listing before the response), p50`, latency?.simulatedBuffered.ratioP50, '', null),
    row('1. turn / ideal protocol, p50, DynamoDB Local as it is', latency?.local.ratioP50, '', null),
    row('2. round trips, pure turn', writes?.protocol.roundTripsPure, '<= 2', (v) => v <= 2),
    row('2. round trips, turn with a model call', writes?.protocol.roundTripsExternal, '<= 3', (v) => v <= 3),
    row('2. round trips an Idempotency-Key adds', writes?.protocol.roundTripsKeyedExtra, '0', (v) => v === 0),
    row('2. WRU, async turn with two model calls', writes?.protocol.asyncTurnWru, '<= 12', (v) => v <= 12),
    row(`2. write growth, turn ${writes?.checkpoints.at(-1)?.turn ?? 'N'} / turn 2`, writes?.growthRatio, '<= 1.1', (v) => v <= 1.1),
    row('2. the same stored RAGFlow\'s way', writes?.ragflowGrowth, '', null),
    row('2. quotas on: extra round trips per turn', writes?.quotas.extraRoundTrips, '', null),
    row('2. quotas on: extra WRU per turn', writes?.quotas.extraWcu, '', null),
    row('2. quotas on: extra RRU per turn', writes?.quotas.extraRcu, '', null),
    row('3. CPU per turn, LangGraph.js / Easel', cpu?.ratio, '>= 20', (v) => v >= 20),
    row('4. JS loaded at init, KB over the floor, max', cold?.initKbOverFloorMax, '<= 400', (v) => v <= 400),
    row('4. module init / floor, max', cold?.initRatioMax, '<= 1.5', (v) => v <= 1.5),
    row('4. init + first request / floor, http (first turn of a run)', cold?.firstRequest?.ratio, '', null),
    row('5. handler CPU / its bare SDK calls, p50', handlerCpu?.ratio, '', null),
    row('6. $ per million turns', dollars?.usdPerMillionTurns, '<= 4', (v) => v <= 4),
    row('6. $ per million turns, Idempotency-Key on every turn', dollars?.usdPerMillionTurnsKeyed, '<= 4', (v) => v <= 4),
    row('6. $ per million turns, quotas on', dollars?.usdPerMillionTurnsWithQuotas, '', null),
    row(`7. knowledge index load ms, ${knowledge?.chunks ?? 'N'} chunks, full text`, knowledge?.fullText.loadMs, '< 1000', (v) => v < 1000),
    row(`7. the same with ${knowledge?.dimensions ?? 'N'}-dimension vectors`, knowledge?.hybrid.loadMs, '< 1000', (v) => v < 1000),
    row('7. knowledge query p95 ms, full text', knowledge?.fullText.queryP95Ms, '', null),
    row('7. knowledge query p95 ms, with vectors', knowledge?.hybrid.queryP95Ms, '', null),
  ]);
  console.log(`\nseconds per step: ${Object.entries(seconds).map(([k, v]) => `${/^\d$/.test(k) ? `measurement ${k}` : k} ${v}`).join(', ')}`);
  console.log(`wrote ${out} in ${fmt((performance.now() - began) / 1000, 1)} s`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
