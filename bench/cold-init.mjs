/*
 * Module init of one Lambda package's handler, in the fresh process this runs in (measurement
 * 4): the time to load and evaluate the ES module and the chunks it imports statically, which
 * is what the Lambda INIT phase adds to the runtime's own start. Prints {"initMs", "rssMb"} as
 * JSON. Usage: node cold-init.mjs <handler.mjs>. `awslambda` is the global the Node.js Lambda
 * runtime provides (streaming handlers need it).
 */
import { pathToFileURL } from 'node:url';

globalThis.awslambda = {
  streamifyResponse: (fn) => fn,
  HttpResponseStream: { from: (stream) => stream },
};
const started = performance.now();
const loaded = await import(pathToFileURL(process.argv[2]).href);
const initMs = performance.now() - started;
if (typeof loaded.handler !== 'function') {
  process.stderr.write(`${process.argv[2]} exports no handler\n`);
  process.exit(2);
}
process.stdout.write(JSON.stringify({ initMs, rssMb: process.memoryUsage().rss / 1048576 }));
