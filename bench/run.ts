/**
 * `npm run bench [-- --quick]`: every measurement of BENCHMARKS.md in one run on one machine,
 * each printing its method and a table; ratios are measured side by side in the same run.
 * Writes bench/results.json. `--quick` uses tiny counts (a smoke test: `npm test` runs it).
 * Exit code 1 when something failed outright (an error, a lost or conflicting turn); missed
 * targets are reported, not failures.
 *
 * Options: --quick; --only=1,3,... (a subset; results.json then has only their keys);
 * EASEL_DYNAMODB_ENDPOINT=<url> to measure against that DynamoDB instead of launching
 * DynamoDB Local; BENCH_PROFILE=<dir> to write a CPU profile of the stack server.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { coldStart, type ColdStartResult } from './cold-start';
import { cost, type CostResult } from './cost';
import { engineCpu, type EngineCpuResult } from './engine-cpu';
import { knowledgeIndex, type KnowledgeIndexResult } from './knowledge';
import { describeMachine } from './lib/machine';
import { reportProfile } from './lib/profile';
import { type Database, openDatabase, type Stack, startStack } from './lib/stack';
import { fmt, table } from './lib/stats';
import { throughput, type ThroughputResult } from './throughput';
import { turnOverhead, type TurnOverheadResult } from './turn-overhead';
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
      coldStart: { reps: 2 },
      engineCpu: { warmupTurns: 40, turns: 200, batch: 50 },
      turnOverhead: { warmupSessions: 1, sessions: 3, turnsPerSession: 6 },
      writeCost: { turns: 20, keyedTurns: 4 },
      throughput: { sessions: 10, turnsPerSession: 4 },
      knowledgeIndex: { chunks: 100, queries: 10, warmupQueries: 2, dimensions: 256 },
    }
  : {
      coldStart: { reps: 20 },
      engineCpu: { warmupTurns: 200, turns: 2000, batch: 100 },
      turnOverhead: { warmupSessions: 5, sessions: 50, turnsPerSession: 20 },
      writeCost: { turns: 200, keyedTurns: 20 },
      throughput: { sessions: 100, turnsPerSession: 20 },
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
  let overhead: TurnOverheadResult | undefined;
  let writes: WriteCostResult | undefined;
  let load: ThroughputResult | undefined;
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
  if (only.has(4)) cold = await timed('4', () => coldStart(SIZES.coldStart));
  if (only.has(3)) cpu = await timed('3', () => engineCpu(SIZES.engineCpu));
  if (only.has(7)) knowledge = await timed('7', () => knowledgeIndex(SIZES.knowledgeIndex));

  let db: Database | undefined;
  let stack: Stack | undefined;
  try {
    if ([1, 2, 5, 6].some((m) => only.has(m))) {
      db = await timed('DynamoDB', () => openDatabase());
      console.log(`\nDynamoDB: ${db.description}, table ${db.table}`);
    }
    if (db && [1, 5, 6].some((m) => only.has(m))) stack = await timed('stack server', () => startStack(db as Database));
    if (stack && (only.has(1) || only.has(6))) overhead = await timed('1', () => turnOverhead(stack as Stack, SIZES.turnOverhead));
    if (db && (only.has(2) || only.has(6))) writes = await timed('2', () => writeCost(db as Database, SIZES.writeCost));
    if (db && stack && only.has(5)) {
      load = await timed('5', () => throughput(db as Database, stack as Stack, SIZES.throughput));
      if (load.conflicts + load.errors + load.lost + load.replayFailures > 0) failed = true;
    }
  } finally {
    await stack?.close();
    await db?.stop();
  }
  if (process.env.BENCH_PROFILE && stack) reportProfile(process.env.BENCH_PROFILE);
  if (overhead && overhead.replayFailures > 0) failed = true;
  if (only.has(6) && overhead && writes) {
    const base = { cpuMsPerTurn: overhead.cpuUsMean / 1000, logBytesPerTurn: overhead.logBytesPerTurn, componentsPerTurn: overhead.componentsPerTurn };
    // the provider's memorySize in serverless.yml, for one more line
    const deployed = Number(/^\s+memorySize:\s*(\d+)/m.exec(readFileSync(new URL('../serverless.yml', import.meta.url), 'utf8'))?.[1]) || undefined;
    dollars = cost(
      // the cleanup's deletes when the session expires, amortized over its turns, are part of a turn's bill
      { ...base, wcuPerTurn: writes.meanWcu + writes.cleanupWruPerTurn, rcuPerTurn: writes.meanRcu, roundTripsPerTurn: overhead.roundTripsPerTurn },
      { ...base, wcuPerTurn: writes.keyed.meanWcu + writes.cleanupWruPerTurn, rcuPerTurn: writes.keyed.meanRcu, roundTripsPerTurn: writes.keyed.meanRoundTrips },
      deployed,
      // the plain turn plus what quotas added to the same turns
      {
        ...base,
        wcuPerTurn: writes.meanWcu + writes.quotas.extraWcu + writes.cleanupWruPerTurn,
        rcuPerTurn: writes.meanRcu + writes.quotas.extraRcu,
        roundTripsPerTurn: overhead.roundTripsPerTurn + writes.quotas.extraRoundTrips,
      },
    );
  }

  const results: Record<string, unknown> = {
    date,
    machine,
    quick,
    ...(overhead ? { turn_overhead_ratio: overhead.ratioP50, turn_overhead_p95_ratio: overhead.ratioP95, round_trips_per_turn: overhead.roundTripsPerTurn } : {}),
    ...(writes ? { write_growth_ratio: writes.growthRatio, ragflow_write_growth_ratio: writes.ragflowGrowth, cleanup_wru_per_turn: writes.cleanupWruPerTurn, queued_turn_wru: writes.async.meanWcu } : {}),
    ...(writes ? { quota_extra_round_trips_per_turn: writes.quotas.extraRoundTrips, quota_extra_wru_per_turn: writes.quotas.extraWcu, quota_extra_rru_per_turn: writes.quotas.extraRcu, quota_turn_wru: writes.quotas.meanWcu } : {}),
    ...(cpu ? { cpu_ratio_vs_langgraph: cpu.ratio } : {}),
    ...(cold ? { init_kb_over_floor_max: cold.initKbOverFloorMax, init_ratio_vs_floor_max: cold.initRatioMax } : {}),
    ...(load ? { throughput_ratio: load.ratio } : {}),
    ...(dollars ? { usd_per_million_turns: dollars.usdPerMillionTurns } : {}),
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
    details: { turnOverhead: overhead, writeCost: writes, engineCpu: cpu, coldStart: cold, throughput: load, cost: dollars, knowledgeIndex: knowledge },
  };
  const out = fileURLToPath(new URL('results.json', import.meta.url));
  writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);

  console.log('\n## Summary');
  const row = (name: string, value: number | undefined, target: string, ok: ((v: number) => boolean) | null): (string | number)[] =>
    value === undefined ? [name, '-', target, 'not run'] : [name, Number(value.toFixed(2)), target, ok === null ? '' : ok(value) ? 'met' : 'MISSED'];
  table(['measure', 'value', 'target', ''], [
    row('1. turn / bare DynamoDB calls, p50', overhead?.ratioP50, '<= 1.15', (v) => v <= 1.15),
    row('1. turn / bare DynamoDB calls, p95', overhead?.ratioP95, '', null),
    row('1. DynamoDB round trips per turn', overhead?.roundTripsPerTurn, '', null),
    row(`2. write growth, turn ${writes?.checkpoints.at(-1)?.turn ?? 'N'} / turn 2`, writes?.growthRatio, '<= 1.1', (v) => v <= 1.1),
    row('2. the same stored RAGFlow\'s way', writes?.ragflowGrowth, '', null),
    row('2. quotas on: extra round trips per turn', writes?.quotas.extraRoundTrips, '', null),
    row('2. quotas on: extra WRU per turn', writes?.quotas.extraWcu, '', null),
    row('2. quotas on: extra RRU per turn', writes?.quotas.extraRcu, '', null),
    row('3. CPU per turn, LangGraph.js / Easel', cpu?.ratio, '>= 5', (v) => v >= 5),
    row('4. JS loaded at init, KB over the floor, max', cold?.initKbOverFloorMax, '<= 400', (v) => v <= 400),
    row('4. module init / floor, max', cold?.initRatioMax, '<= 1.5', (v) => v <= 1.5),
    row('5. throughput, stack / direct', load?.ratio, '>= 0.8', (v) => v >= 0.8),
    row('5. conflicts + losses', load ? load.conflicts + load.errors + load.lost : undefined, '0', (v) => v === 0),
    row('6. $ per million turns', dollars?.usdPerMillionTurns, '<= 5', (v) => v <= 5),
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
