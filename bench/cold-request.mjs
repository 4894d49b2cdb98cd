/*
 * A cold start as a user meets it (measurement 4): in the fresh process this runs in, load one
 * Lambda package's handler (module init), then invoke it once (the first request, which loads
 * the lazy chunks it needs and warms the SDK). Prints {"initMs", "firstMs"} as JSON.
 * Usage: node cold-request.mjs <handler.mjs>; COLD_EVENT holds the event as JSON (none: the
 * handler is called without one, as the floor's ignores it). A response other than 200 fails.
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';

globalThis.awslambda = {
  streamifyResponse: (fn) => fn,
  HttpResponseStream: { from: (stream) => stream },
};
const started = performance.now();
const { handler } = await import(pathToFileURL(process.argv[2]).href);
const initMs = performance.now() - started;

const event = process.env.COLD_EVENT ? JSON.parse(process.env.COLD_EVENT) : undefined;
const deadline = Date.now() + 29_000;
const context = {
  callbackWaitsForEmptyEventLoop: true,
  functionName: 'easel-bench-cold',
  functionVersion: '$LATEST',
  memoryLimitInMB: '512',
  awsRequestId: randomUUID(),
  getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
};
const invoked = performance.now();
const result = await handler(event, context);
const firstMs = performance.now() - invoked;
if (event && result?.statusCode !== 200) {
  process.stderr.write(`the first request answered ${result?.statusCode}: ${String(result?.body).slice(0, 300)}\n`);
  process.exit(2);
}
process.stdout.write(`${JSON.stringify({ initMs, firstMs })}\n`);
// the SDK's keep-alive sockets would hold the process open
process.exit(0);
