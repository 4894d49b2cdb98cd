/**
 * The local stack under measurement, in a process of its own (as a Lambda is): the app exactly
 * as the Lambda entry points wire it (readConfig -> buildRuntime -> appDeps -> createApp, with request
 * telemetry and one metrics flush per request), served by @hono/node-server, on the DynamoDB
 * named by EASEL_DYNAMODB_ENDPOINT / EASEL_DYNAMODB_TABLE. Its DocumentClient carries the
 * recording decorator (bench/lib/recorder.ts). A request with an `x-bench-trace` header gets
 * its DynamoDB calls and its CPU time recorded under that id; the parent asks over IPC for
 * traces and for the ideal protocol of a traced turn, issued bare by this process's client on
 * the turn's mirror session (bench/lib/recorder.ts `prepareIdeal`). Logs (one JSON line and one
 * EMF line per request, as on Lambda) go to stdout, which the parent counts.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { readConfig } from '../lib/config';
import { createApp } from '../lib/http/app';
import { appDeps } from '../lib/http/deps';
import { withTelemetry } from '../lib/http/observability';
import { buildRuntime, createTelemetry } from '../lib/runtime';
import { instrument, operationName, prepareIdeal, replay, type Trace, traceContext } from './lib/recorder';
import { seedBenchTenant } from './lib/tenant';

export interface TraceSummary {
  /** DynamoDB operations in order, e.g. ['Query', 'UpdateItem', 'PutItem', 'UpdateItem']. */
  operations: string[];
  /** Time spent waiting for DynamoDB inside the request (sum of call latencies). */
  dynamoMs: number;
  /** Each call's latency, in order. */
  callMs: number[];
  /** CPU time of this process from the request's arrival to the end of its response. */
  cpuUs: number;
}

export type StackRequest =
  | { op: 'summary'; traces: string[] }
  | { op: 'ideal'; trace: string }
  | { op: 'forget'; traces: string[] };

export type StackMessage =
  | { type: 'ready'; url: string; apiKey: string; tenant: string; workflowId: string }
  | { type: 'reply'; id: number; result?: unknown; error?: string };

const traces = new Map<string, Trace & { cpuUs: number }>();
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

async function main(): Promise<void> {
  const config = readConfig(process.env);
  const telemetry = createTelemetry();
  // BENCH_ENTRY=stream: wired as functions/http-stream.ts is, the run's listing written after the
  // response (the Node server sends it and lets the work finish); else as functions/http.ts,
  // behind API Gateway's buffered responses, where it comes before
  const afterResponse = process.env.BENCH_ENTRY === 'stream'
    ? (work: () => Promise<void>) => void work().catch((error: unknown) => telemetry.logger.error('the run listing was not updated', { error }))
    : undefined;
  const runtime = buildRuntime(config, { logger: telemetry.logger, ...(afterResponse ? { afterResponse } : {}) });
  const { store } = runtime;
  instrument(store.doc);
  const app = withTelemetry(createApp(appDeps(runtime)), telemetry);

  const { tenant, secret: apiKey, workflowId } = await seedBenchTenant(store);

  const fetch = async (request: Request): Promise<Response> => {
    const id = request.headers.get('x-bench-trace');
    if (!id) return app.fetch(request);
    let trace = traces.get(id);
    if (!trace) traces.set(id, (trace = { calls: [], cpuUs: 0 }));
    try {
      return await traceContext.run(trace, () => app.fetch(request));
    } finally {
      // a Lambda entry point publishes its metrics at the end of every invocation
      telemetry.flush();
    }
  };
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    const id = req.headers['x-bench-trace'];
    if (typeof id !== 'string') return;
    const started = cpu();
    res.on('finish', () => {
      const trace = traces.get(id);
      if (trace) trace.cpuUs = cpu() - started;
    });
  });

  const handle = async (message: StackRequest): Promise<unknown> => {
    switch (message.op) {
      case 'summary':
        return message.traces.map((id): TraceSummary => {
          const t = traces.get(id);
          if (!t) throw new Error(`no trace ${id}`);
          return { operations: t.calls.map((c) => operationName(c.name)), dynamoMs: t.calls.reduce((n, c) => n + c.ms, 0), callMs: t.calls.map((c) => c.ms), cpuUs: t.cpuUs };
        });
      case 'ideal': {
        const t = traces.get(message.trace);
        if (!t) throw new Error(`no trace ${message.trace}`);
        const ideal = prepareIdeal(t.calls);
        const timed = await replay(store.doc, ideal.commands);
        await ideal.syncHead(store.doc);
        return timed;
      }
      case 'forget':
        for (const id of message.traces) traces.delete(id);
        return null;
    }
  };

  process.on('message', (raw: { id: number } & StackRequest) => {
    handle(raw).then(
      (result) => process.send?.({ type: 'reply', id: raw.id, result } satisfies StackMessage),
      (error: unknown) => process.send?.({ type: 'reply', id: raw.id, error: String((error as Error)?.stack ?? error) } satisfies StackMessage),
    );
  });
  process.on('disconnect', () => {
    server.close();
    process.exit(0);
  });
  const { port } = server.address() as AddressInfo;
  process.send?.({ type: 'ready', url: `http://127.0.0.1:${port}`, apiKey, tenant, workflowId } satisfies StackMessage);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
