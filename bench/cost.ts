/**
 * 6. Cost per million turns on AWS, from this run's figures: consumed capacity per turn
 * (measurement 2), DynamoDB round trips, server CPU and log bytes per turn (measurement 1),
 * components run per turn (for Step Functions). Prices are the public on-demand list prices
 * written below; the handler's duration is estimated, and every assumption is printed.
 */
import { fmt, heading, table, verdict } from './lib/stats';

/** Public list prices, us-east-1, on-demand (checked 2025; see BENCHMARKS.md for the sources). */
export const PRICES = {
  /** AWS Lambda, per request. */
  lambdaRequest: 0.2 / 1e6,
  /** AWS Lambda arm64, per GB-second (first 7.5 billion GB-s per month). */
  lambdaArmGbSecond: 0.0000133334,
  /** API Gateway HTTP API, per request (first 300 million per month; 512 KB increments). */
  httpApiRequest: 1.0 / 1e6,
  /** DynamoDB on-demand, per write request unit (standard table class; GSI writes and transactional writes are WRUs too, 2 per KB in a transaction). */
  dynamoWru: 0.625 / 1e6,
  /** DynamoDB on-demand, per read request unit (a strongly consistent read of up to 4 KB). */
  dynamoRru: 0.125 / 1e6,
  /** CloudWatch Logs ingestion, per GB (standard log class). */
  logsIngestGb: 0.5,
  /** Step Functions Standard workflows, per state transition. */
  stepFunctionsTransition: 0.025 / 1000,
} as const;

export const ASSUMPTIONS = {
  /** Lambda memory size the estimate is for, and the size at which a function has one vCPU. */
  memoryMb: 256,
  fullVcpuMb: 1769,
  /** DynamoDB latency per round trip from Lambda in the same region (p50, single-digit ms). */
  dynamoLatencyMs: 5,
  /** Local CPU time counts as arm64 (Graviton) CPU time one for one. */
  cpuSpeedFactor: 1,
} as const;

export interface CostInputs {
  wcuPerTurn: number;
  rcuPerTurn: number;
  roundTripsPerTurn: number;
  /** Server CPU per turn, ms (the whole request: HTTP, app, engine, SDK, logs). */
  cpuMsPerTurn: number;
  logBytesPerTurn: number;
  componentsPerTurn: number;
}

export interface CostLine {
  item: string;
  perTurn: string;
  usdPerMillion: number;
}

export interface CostResult {
  usdPerMillionTurns: number;
  usdPerMillionTurnsWithLogs: number;
  usdPerMillionTurnsKeyed: number;
  /** With every quota on (EASEL_QUOTA_*), when measured. */
  usdPerMillionTurnsWithQuotas?: number;
  stepFunctionsUsdPerMillionTurns: number;
  durationMs: number;
  lines: CostLine[];
}

/** Estimated handler duration (ms) at `memoryMb`: CPU scaled by the CPU share, plus DynamoDB waits. */
function duration(inputs: CostInputs, memoryMb: number): number {
  const share = Math.min(1, memoryMb / ASSUMPTIONS.fullVcpuMb);
  return (inputs.cpuMsPerTurn * ASSUMPTIONS.cpuSpeedFactor) / share + inputs.roundTripsPerTurn * ASSUMPTIONS.dynamoLatencyMs;
}

function durationUsd(inputs: CostInputs, memoryMb: number): number {
  return (memoryMb / 1024) * (Math.ceil(duration(inputs, memoryMb)) / 1000) * PRICES.lambdaArmGbSecond * 1e6;
}

function lines(inputs: CostInputs): { lines: CostLine[]; durationMs: number } {
  const durationMs = duration(inputs, ASSUMPTIONS.memoryMb);
  const billedSeconds = Math.ceil(durationMs) / 1000;
  const gbSeconds = (ASSUMPTIONS.memoryMb / 1024) * billedSeconds;
  const m = 1e6;
  return {
    durationMs,
    lines: [
      { item: 'HTTP API requests', perTurn: '1 request', usdPerMillion: PRICES.httpApiRequest * m },
      { item: 'Lambda requests', perTurn: '1 invocation', usdPerMillion: PRICES.lambdaRequest * m },
      { item: 'Lambda duration (arm64)', perTurn: `${fmt(billedSeconds * 1000, 0)} ms billed x ${ASSUMPTIONS.memoryMb} MB = ${fmt(gbSeconds, 5)} GB-s`, usdPerMillion: gbSeconds * PRICES.lambdaArmGbSecond * m },
      { item: 'DynamoDB writes (incl. GSI)', perTurn: `${fmt(inputs.wcuPerTurn)} WRU`, usdPerMillion: inputs.wcuPerTurn * PRICES.dynamoWru * m },
      { item: 'DynamoDB reads', perTurn: `${fmt(inputs.rcuPerTurn)} RRU`, usdPerMillion: inputs.rcuPerTurn * PRICES.dynamoRru * m },
    ],
  };
}

/** `deployedMemoryMb`: serverless.yml's memorySize, for one more line; `quotas`: the turn with every quota on. */
export function cost(plain: CostInputs, keyed: CostInputs, deployedMemoryMb?: number, quotas?: CostInputs): CostResult {
  heading(
    '6. Cost per million turns on AWS',
    `capacity per turn from measurement 2 (mean over the whole conversation, the larger of reported and size-computed), round trips / server CPU / log bytes / components per turn from measurement 1; handler duration = local CPU / (${ASSUMPTIONS.memoryMb}/${ASSUMPTIONS.fullVcpuMb} vCPU) + ${ASSUMPTIONS.dynamoLatencyMs} ms x round trips, billed per ms at ${ASSUMPTIONS.memoryMb} MB arm64; list prices us-east-1 on-demand as written in bench/cost.ts.`,
  );
  const share = ASSUMPTIONS.memoryMb / ASSUMPTIONS.fullVcpuMb;
  console.log(
    `assumptions: ${ASSUMPTIONS.memoryMb} MB arm64 = ${fmt(share, 3)} vCPU (${ASSUMPTIONS.fullVcpuMb} MB = 1 vCPU); local CPU ms = Graviton CPU ms x${ASSUMPTIONS.cpuSpeedFactor}; DynamoDB ${ASSUMPTIONS.dynamoLatencyMs} ms per round trip; measured: ${fmt(plain.cpuMsPerTurn)} ms CPU, ${fmt(plain.roundTripsPerTurn)} round trips, ${fmt(plain.wcuPerTurn)} WRU, ${fmt(plain.rcuPerTurn)} RRU, ${fmt(plain.logBytesPerTurn, 0)} log bytes, ${fmt(plain.componentsPerTurn, 1)} components per turn`,
  );
  console.log(
    `prices: Lambda $${PRICES.lambdaRequest * 1e6}/M requests + $${PRICES.lambdaArmGbSecond}/GB-s (arm64); HTTP API $${PRICES.httpApiRequest * 1e6}/M; DynamoDB on-demand $${PRICES.dynamoWru * 1e6}/M WRU, $${PRICES.dynamoRru * 1e6}/M RRU (GSI writes are WRUs; a transactional write costs 2 WRU per KB); CloudWatch Logs $${PRICES.logsIngestGb}/GB ingested; Step Functions Standard $${PRICES.stepFunctionsTransition * 1000}/1000 transitions`,
  );
  const a = lines(plain);
  const b = lines(keyed);
  const total = (l: CostLine[]) => l.reduce((n, x) => n + x.usdPerMillion, 0);
  const logs = (plain.logBytesPerTurn / 1024 ** 3) * PRICES.logsIngestGb * 1e6;
  const stepFunctions = plain.componentsPerTurn * PRICES.stepFunctionsTransition * 1e6;
  table(
    ['item', 'per turn', '$ per million turns', 'with Idempotency-Key: per turn', '$ per million turns '],
    [
      ...a.lines.map((l, i) => [l.item, l.perTurn, l.usdPerMillion, (b.lines[i] as CostLine).perTurn, (b.lines[i] as CostLine).usdPerMillion]),
      ['total (target <= $5)', `~${fmt(a.durationMs, 1)} ms handler`, total(a.lines), `~${fmt(b.durationMs, 1)} ms handler`, total(b.lines)],
      ['+ CloudWatch Logs (request log + EMF)', `${fmt(plain.logBytesPerTurn, 0)} B`, logs, '', ''],
      ...(deployedMemoryMb && deployedMemoryMb !== ASSUMPTIONS.memoryMb
        ? [[`Lambda duration at serverless.yml's ${deployedMemoryMb} MB instead`, `~${fmt(duration(plain, deployedMemoryMb), 1)} ms`, durationUsd(plain, deployedMemoryMb), `~${fmt(duration(keyed, deployedMemoryMb), 1)} ms`, durationUsd(keyed, deployedMemoryMb)]]
        : []),
      ['Step Functions Standard, same transitions', `${fmt(plain.componentsPerTurn, 1)} transitions`, stepFunctions, '', ''],
    ],
  );
  const result: CostResult = {
    usdPerMillionTurns: total(a.lines),
    usdPerMillionTurnsWithLogs: total(a.lines) + logs,
    usdPerMillionTurnsKeyed: total(b.lines),
    stepFunctionsUsdPerMillionTurns: stepFunctions,
    durationMs: a.durationMs,
    lines: a.lines,
  };
  if (quotas) {
    const q = lines(quotas);
    result.usdPerMillionTurnsWithQuotas = total(q.lines);
    console.log(`with every quota on: ${fmt(quotas.wcuPerTurn)} WRU, ${fmt(quotas.rcuPerTurn)} RRU, ${fmt(quotas.roundTripsPerTurn)} round trips a turn, ~${fmt(q.durationMs, 1)} ms handler: $${fmt(result.usdPerMillionTurnsWithQuotas)} per million turns`);
  }
  console.log(`target <= $5 per million turns: ${verdict(result.usdPerMillionTurns, '<=', 5)} (with logs $${fmt(result.usdPerMillionTurnsWithLogs)}, with an Idempotency-Key on every turn $${fmt(result.usdPerMillionTurnsKeyed)}); Step Functions Standard would charge $${fmt(stepFunctions)} for the transitions alone`);
  return result;
}
