/*
 * Runs a Lambda package's handler as the Node.js runtime would: `node packaged-handler.mjs
 * <task root> <handler module>` imports the module from the unzipped package in this fresh
 * process, then answers one invocation per line of stdin ({"event", "functionName"} as JSON)
 * with one line of stdout ({"result"} or {"error"}). Log lines the handler prints go to stderr.
 */
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [taskRoot, handlerModule] = process.argv.slice(2);
const out = process.stdout.write.bind(process.stdout);
// the handler's own log lines must not be taken for answers
process.stdout.write = process.stderr.write.bind(process.stderr);
const started = performance.now();
const { handler } = await import(pathToFileURL(join(taskRoot, handlerModule)).href);
out(`${JSON.stringify({ ready: typeof handler === 'function', initMs: performance.now() - started })}\n`);

let request = 0;
for await (const line of createInterface({ input: process.stdin })) {
  const { event, functionName } = JSON.parse(line);
  const deadline = Date.now() + 29_000;
  const context = {
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: `packaged-${++request}`,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'packaged',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done() {},
    fail() {},
    succeed() {},
  };
  try {
    out(`${JSON.stringify({ result: await handler(event, context) })}\n`);
  } catch (error) {
    out(`${JSON.stringify({ error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) })}\n`);
  }
}
