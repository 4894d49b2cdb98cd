/**
 * The process measurement 5 runs in (forked by bench/server-cpu.ts, as a Lambda sandbox runs
 * one function): functions/http.ts's own `handler`, built from the environment exactly as on
 * Lambda, invoked with API Gateway HTTP API (payload 2.0) events one at a time. Every
 * DocumentClient of the process records its calls (bench/lib/recorder.ts); after each turn the
 * same process replays the turn's calls bare, with the handler's own client, on a mirror session.
 * Logs go to stdout as on Lambda (the parent counts them); results go back over IPC.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { readStoreConfig } from '../lib/config';
import { buildStore } from '../lib/runtime/store';
import { httpApiEvent, invocationContext } from './lib/lambda-events';
import { instrumentEveryClient, operationName, prepareReplay, replay, type Trace, traceContext } from './lib/recorder';
import { cpuMicros } from './lib/stats';
import { seedBenchTenant } from './lib/tenant';
import { turnInput } from './workflow';

export interface DriverRequest {
  warmupSessions: number;
  sessions: number;
  turnsPerSession: number;
}

export interface DriverTurn {
  kind: 'first' | 'pause' | 'answer';
  /** CPU of this process while the handler ran (µs), and its wall time. */
  handlerCpuUs: number;
  handlerMs: number;
  /** CPU of this process while it replayed the turn's DynamoDB calls bare (µs), and their wall time. */
  sdkCpuUs: number;
  sdkMs: number;
  operations: string[];
  components: number;
  /** The turn completed a pass of the workflow (status `completed`). */
  completed: boolean;
}

export type DriverMessage =
  | { type: 'done'; turns: DriverTurn[]; tenant: string; runIds: string[]; replayFailures: number }
  | { type: 'error'; error: string };

type Handler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyStructuredResultV2>;

async function drive(request: DriverRequest): Promise<Extract<DriverMessage, { type: 'done' }>> {
  const clients = instrumentEveryClient();
  const { handler } = (await import('../functions/http')) as unknown as { handler: Handler };
  const { store, client } = buildStore(readStoreConfig());
  const { tenant, secret, workflowId } = await seedBenchTenant(store);
  client.destroy();

  const turns: DriverTurn[] = [];
  const runIds: string[] = [];
  let replayFailures = 0;
  for (let s = 0; s < request.warmupSessions + request.sessions; s++) {
    let runId: string | undefined;
    for (let k = 1; k <= request.turnsPerSession; k++) {
      const body = JSON.stringify({ ...(runId ? { run_id: runId, turn_number: k - 1 } : {}), run_input: turnInput(k) });
      const event = httpApiEvent('POST', `/workflows/v1/workflows/${workflowId}/execute`, { headers: { authorization: `Bearer ${secret}` }, body });
      const context = invocationContext('easel-http', 29_000);
      const trace: Trace = { calls: [] };
      const cpu = cpuMicros();
      const started = performance.now();
      const result = await traceContext.run(trace, () => handler(event, context));
      const handlerMs = performance.now() - started;
      const handlerCpuUs = cpuMicros() - cpu;
      const text = result.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64').toString('utf8') : (result.body ?? '');
      if (result.statusCode !== 200) throw new Error(`turn ${k} answered ${result.statusCode}: ${text.slice(0, 300)}`);
      const answer = JSON.parse(text) as { run_id: string; status: string; events: { event: string }[] };
      runId = answer.run_id;
      const doc = clients.lastClient();
      if (!doc) throw new Error('the handler made no DynamoDB call');
      const bare = await replay(doc, prepareReplay(trace.calls));
      replayFailures += bare.failures;
      if (s < request.warmupSessions) continue;
      turns.push({
        kind: k === 1 ? 'first' : k % 2 === 1 ? 'pause' : 'answer',
        handlerCpuUs,
        handlerMs,
        sdkCpuUs: bare.cpuUs,
        sdkMs: bare.ms,
        operations: trace.calls.map((c) => operationName(c.name)),
        components: answer.events.filter((e) => e.event === 'node_started').length,
        completed: answer.status === 'completed',
      });
    }
    if (s >= request.warmupSessions && runId) runIds.push(runId);
  }
  return { type: 'done', turns, tenant, runIds, replayFailures };
}

process.once('message', (request: DriverRequest) => {
  drive(request).then(
    (done) => process.send?.(done satisfies DriverMessage, () => process.exit(0)),
    (error: unknown) => process.send?.({ type: 'error', error: String((error as Error)?.stack ?? error) } satisfies DriverMessage, () => process.exit(1)),
  );
});
