/**
 * 6. Cost per million turns on AWS, from this run's figures: capacity and round trips per turn
 * of the bench workflow's conversation, the session cleanup's deletes included (measurement 2),
 * the handler's CPU, log bytes and components per turn (measurement 5). Beside it, what the
 * same turns would cost in orchestration charges alone on Lambda durable functions, Step
 * Functions Standard and LangSmith Deployment. Prices are the list prices below; the handler's
 * duration is estimated, and every assumption is printed.
 */
import { fmt, heading, table, verdict } from './lib/stats';

/** When the list prices below were taken from the providers' pricing pages. */
export const PRICES_AS_OF = '2026-09';

/**
 * Public list prices, us-east-1, on-demand, as of PRICES_AS_OF: aws.amazon.com/lambda/pricing,
 * /api-gateway/pricing, /dynamodb/pricing/on-demand, /cloudwatch/pricing, /step-functions/pricing;
 * docs.langchain.com/langsmith/billing (LangSmith Deployment).
 */
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
  /** Lambda durable functions, per durable operation (the execution, each step, wait and callback); data written and retained are extra. */
  durableOperation: 8 / 1e6,
  /** Step Functions Standard workflows, per state transition. */
  stepFunctionsTransition: 25 / 1e6,
  /** LangSmith Deployment, per agent run (one end-to-end invocation; a resume after an interrupt is another run); uptime is extra. */
  langSmithRun: 0.005,
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
  /** Handler CPU per turn, ms (the whole invocation: event, app, engine, SDK, logs). */
  cpuMsPerTurn: number;
  logBytesPerTurn: number;
}

/** What a turn of the workflow is, for the orchestrators it is compared with. */
export interface TurnShape {
  /** Components run per turn (node_started events). */
  componentsPerTurn: number;
  /** Share of turns that complete a pass, after which the workflow waits for the next message. */
  completedPerTurn: number;
  turnsPerConversation: number;
}

export interface CostLine {
  item: string;
  perTurn: string;
  usdPerMillion: number;
}

export interface Alternative {
  name: string;
  /** Operations, transitions or runs per turn. */
  unitsPerTurn: number;
  unit: string;
  why: string;
  usdPerMillionTurns: number;
}

export interface CostResult {
  usdPerMillionTurns: number;
  usdPerMillionTurnsWithLogs: number;
  usdPerMillionTurnsKeyed: number;
  /** With every quota on (EASEL_QUOTA_*), when measured. */
  usdPerMillionTurnsWithQuotas?: number;
  durationMs: number;
  lines: CostLine[];
  alternatives: Alternative[];
  pricesAsOf: string;
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
      { item: 'DynamoDB writes (incl. GSI and the cleanup)', perTurn: `${fmt(inputs.wcuPerTurn)} WRU`, usdPerMillion: inputs.wcuPerTurn * PRICES.dynamoWru * m },
      { item: 'DynamoDB reads', perTurn: `${fmt(inputs.rcuPerTurn)} RRU`, usdPerMillion: inputs.rcuPerTurn * PRICES.dynamoRru * m },
    ],
  };
}

/** The same turns' orchestration charges elsewhere, and how many units a turn would be on each. */
function alternatives(shape: TurnShape): Alternative[] {
  const states = shape.componentsPerTurn + shape.completedPerTurn;
  const durableOps = states + 1 / shape.turnsPerConversation;
  return [
    {
      name: 'Lambda durable functions',
      unitsPerTurn: durableOps,
      unit: 'durable operations',
      why: `a step per component run (the form a callback: its result must not be computed again on replay), a callback waiting for the next message after each completed pass, and the execution once per ${shape.turnsPerConversation}-turn conversation; data written and retained, and the Lambda requests and duration of every resume, come on top`,
      usdPerMillionTurns: durableOps * PRICES.durableOperation * 1e6,
    },
    {
      name: 'Step Functions Standard',
      unitsPerTurn: states,
      unit: 'state transitions',
      why: 'a state per component run (the form a .waitForTaskToken task), and a task-token state waiting for the next message after each completed pass; the Lambda and API Gateway behind it come on top',
      usdPerMillionTurns: states * PRICES.stepFunctionsTransition * 1e6,
    },
    {
      name: 'LangSmith Deployment',
      unitsPerTurn: 1,
      unit: 'agent run',
      why: 'every turn is one invocation of the graph: the first starts it, each later one resumes it after an interrupt, and a resume is a run of its own; nodes are not charged; the deployment\'s uptime comes on top',
      usdPerMillionTurns: PRICES.langSmithRun * 1e6,
    },
  ];
}

/** `deployedMemoryMb`: serverless.yml's memorySize, for one more line; `quotas`: the turn with every quota on. */
export function cost(plain: CostInputs, keyed: CostInputs, shape: TurnShape, deployedMemoryMb?: number, quotas?: CostInputs): CostResult {
  heading(
    '6. Cost per million turns on AWS',
    `capacity and round trips per turn from measurement 2 (the bench workflow's ${shape.turnsPerConversation}-turn conversation, means over every turn with the first, the larger of reported and size-computed, the session cleanup's deletes amortized over its turns), handler CPU / log bytes / components per turn from measurement 5; handler duration = CPU / (${ASSUMPTIONS.memoryMb}/${ASSUMPTIONS.fullVcpuMb} vCPU) + ${ASSUMPTIONS.dynamoLatencyMs} ms x round trips, billed per ms at ${ASSUMPTIONS.memoryMb} MB arm64; list prices us-east-1 on-demand as of ${PRICES_AS_OF}, written in bench/cost.ts.`,
  );
  const share = ASSUMPTIONS.memoryMb / ASSUMPTIONS.fullVcpuMb;
  console.log(
    `assumptions: ${ASSUMPTIONS.memoryMb} MB arm64 = ${fmt(share, 3)} vCPU (${ASSUMPTIONS.fullVcpuMb} MB = 1 vCPU); local CPU ms = Graviton CPU ms x${ASSUMPTIONS.cpuSpeedFactor}; DynamoDB ${ASSUMPTIONS.dynamoLatencyMs} ms per round trip; measured: ${fmt(plain.cpuMsPerTurn)} ms CPU, ${fmt(plain.roundTripsPerTurn)} round trips, ${fmt(plain.wcuPerTurn)} WRU, ${fmt(plain.rcuPerTurn)} RRU, ${fmt(plain.logBytesPerTurn, 0)} log bytes, ${fmt(shape.componentsPerTurn, 1)} components per turn, ${fmt(shape.completedPerTurn, 2)} completed passes per turn`,
  );
  console.log(
    `prices (as of ${PRICES_AS_OF}): Lambda $${fmt(PRICES.lambdaRequest * 1e6)}/M requests + $${PRICES.lambdaArmGbSecond}/GB-s (arm64); HTTP API $${fmt(PRICES.httpApiRequest * 1e6)}/M; DynamoDB on-demand $${PRICES.dynamoWru * 1e6}/M WRU, $${PRICES.dynamoRru * 1e6}/M RRU (GSI writes are WRUs; a transactional write costs 2 WRU per KB); CloudWatch Logs $${PRICES.logsIngestGb}/GB ingested; Lambda durable functions $${fmt(PRICES.durableOperation * 1e6)}/M operations; Step Functions Standard $${fmt(PRICES.stepFunctionsTransition * 1e6)}/M transitions; LangSmith Deployment $${PRICES.langSmithRun}/run`,
  );
  const a = lines(plain);
  const b = lines(keyed);
  const total = (l: CostLine[]) => l.reduce((n, x) => n + x.usdPerMillion, 0);
  const logs = (plain.logBytesPerTurn / 1024 ** 3) * PRICES.logsIngestGb * 1e6;
  table(
    ['item', 'per turn', '$ per million turns', 'with Idempotency-Key: per turn', '$ per million turns '],
    [
      ...a.lines.map((l, i) => [l.item, l.perTurn, l.usdPerMillion, (b.lines[i] as CostLine).perTurn, (b.lines[i] as CostLine).usdPerMillion]),
      ['total (target <= $4)', `~${fmt(a.durationMs, 1)} ms handler`, total(a.lines), `~${fmt(b.durationMs, 1)} ms handler`, total(b.lines)],
      ['+ CloudWatch Logs (request log + EMF)', `${fmt(plain.logBytesPerTurn, 0)} B`, logs, '', ''],
      ...(deployedMemoryMb && deployedMemoryMb !== ASSUMPTIONS.memoryMb
        ? [[`Lambda duration at serverless.yml's ${deployedMemoryMb} MB instead`, `~${fmt(duration(plain, deployedMemoryMb), 1)} ms`, durationUsd(plain, deployedMemoryMb), `~${fmt(duration(keyed, deployedMemoryMb), 1)} ms`, durationUsd(keyed, deployedMemoryMb)]]
        : []),
    ],
  );
  const others = alternatives(shape);
  console.log('\nthe same turns elsewhere, orchestration charges alone:');
  table(['service', 'per turn', '$ per million turns', 'why'], others.map((o) => [o.name, `${fmt(o.unitsPerTurn)} ${o.unit}`, o.usdPerMillionTurns, o.why]));
  const result: CostResult = {
    usdPerMillionTurns: total(a.lines),
    usdPerMillionTurnsWithLogs: total(a.lines) + logs,
    usdPerMillionTurnsKeyed: total(b.lines),
    durationMs: a.durationMs,
    lines: a.lines,
    alternatives: others,
    pricesAsOf: PRICES_AS_OF,
  };
  if (quotas) {
    const q = lines(quotas);
    result.usdPerMillionTurnsWithQuotas = total(q.lines);
    console.log(`with every quota on: ${fmt(quotas.wcuPerTurn)} WRU, ${fmt(quotas.rcuPerTurn)} RRU, ${fmt(quotas.roundTripsPerTurn)} round trips a turn, ~${fmt(q.durationMs, 1)} ms handler: $${fmt(result.usdPerMillionTurnsWithQuotas)} per million turns`);
  }
  console.log(`targets <= $4 per million turns: plain ${verdict(result.usdPerMillionTurns, '<=', 4)}; with an Idempotency-Key on every turn ${verdict(result.usdPerMillionTurnsKeyed, '<=', 4)} (with logs $${fmt(result.usdPerMillionTurnsWithLogs)})`);
  return result;
}
