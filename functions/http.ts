/**
 * API Gateway HTTP API (payload 2.0) -> the app. API Gateway buffers responses: an execute
 * with `Accept: text/event-stream` arrives whole at the end; http-stream.ts (a Function URL)
 * streams it live.
 */
import type { Context } from 'aws-lambda';
import { defaultIsContentTypeBinary, handle, type LambdaEvent } from 'hono/aws-lambda';
import { readConfig } from '../lib/config';
import { createApp } from '../lib/http/app';
import { appDeps } from '../lib/http/deps';
import { settleInflight } from '../lib/http/inflight';
import { packagedDocument } from '../lib/http/openapi';
import { withTelemetry } from '../lib/http/observability';
import { buildRuntime, createTelemetry, invocationDeadline } from '../lib/runtime';

const config = readConfig();
const telemetry = createTelemetry();
// turns still running shortly before the invocation times out are aborted: 503, claim given back
const deadline = invocationDeadline(config.deadlineMarginMs);
const runtime = buildRuntime(config, { logger: telemetry.logger, lifecycle: deadline.lifecycle });
// API Gateway cuts responses at 30 s (and this function's timeout is 29 s): a turn follower's stream ends before, and the client reconnects
const app = withTelemetry(createApp({ ...appDeps(runtime), openapiDocument: packagedDocument(), followMaxMs: 20_000 }), telemetry);
// SSE is text: no base64 (a third larger) for API Gateway to decode
const serve = handle(app, { isContentTypeBinary: (type) => !type.startsWith('text/event-stream') && defaultIsContentTypeBinary(type) });

export async function handler(event: LambdaEvent, context: Context) {
  deadline.arm(context);
  try {
    return await serve(event, context);
  } finally {
    // the invocation is frozen once this returns: no turn may be left half-done
    await settleInflight();
    deadline.disarm();
    telemetry.flush();
  }
}
