/**
 * A Lambda Function URL in RESPONSE_STREAM mode -> the app, with live SSE. The invocation
 * ends once the body is written and every turn it started has settled, with what a turn left
 * for after its response (the run's listing).
 */
import type { Context, LambdaFunctionURLEvent, StreamifyHandler } from 'aws-lambda';
import { Hono } from 'hono';
import { streamHandle } from 'hono/aws-lambda';
import { readConfig } from '../lib/config';
import { createApp } from '../lib/http/app';
import { appDeps } from '../lib/http/deps';
import { settleInflight, track } from '../lib/http/inflight';
import { packagedDocument } from '../lib/http/openapi';
import { lambdaContext, withTelemetry } from '../lib/http/observability';
import { buildRuntime, createTelemetry, invocationDeadline } from '../lib/runtime';

/** A client that went away can stall the body for good: once the turns settled, it gets this long. */
const DRAIN_MS = 10_000;

const config = readConfig();
const telemetry = createTelemetry();
const { logger } = telemetry;
// turns still running shortly before the invocation times out are aborted: turn_error (or 503), claim given back
const deadline = invocationDeadline(config.deadlineMarginMs);
// the run's listing follows the response: the client has its answer a round trip sooner, and
// the invocation ends only once it is written (settleInflight below)
const afterResponse = (work: () => Promise<void>) =>
  track(work().catch((error: unknown) => logger.error('the run listing was not updated; the next turn updates it', { error })));
const runtime = buildRuntime(config, { logger, lifecycle: deadline.lifecycle, afterResponse });
// a turn follower's stream ends within the function's 15 minutes; the client reconnects
const app = withTelemetry(createApp({ ...appDeps(runtime), openapiDocument: packagedDocument(), followMaxMs: 14 * 60_000 }), telemetry);
const responded = new WeakMap<object, () => void>();
// streamHandle calls awslambda.streamifyResponse itself; the export below wraps what it returns
const serve = streamHandle(new Hono().all('*', async (c) => {
  const response = await app.fetch(c.req.raw, c.env);
  responded.get(lambdaContext(c) ?? {})?.();
  return response;
})) as unknown as StreamifyHandler<LambdaFunctionURLEvent, void>;

export const handler = awslambda.streamifyResponse<LambdaFunctionURLEvent, void>(async (event, responseStream, context: Context) => {
  deadline.arm(context);
  let timer: NodeJS.Timeout | undefined;
  let finished = false;
  const stalled = new Promise<'stalled'>((resolve) => {
    responded.set(context, () => void settleInflight().then(() => {
      if (!finished) timer = setTimeout(resolve, Math.max(0, Math.min(DRAIN_MS, context.getRemainingTimeInMillis() - 1000)), 'stalled');
    }));
  });
  try {
    if ((await Promise.race([serve(event, responseStream, context), stalled])) === 'stalled') {
      logger.info('response stream stalled after its turns settled; ending the invocation', { lambda_request_id: context.awsRequestId });
    }
  } finally {
    finished = true;
    clearTimeout(timer);
    await settleInflight();
    deadline.disarm();
    telemetry.flush();
  }
});
