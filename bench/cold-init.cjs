/*
 * Module init of one Lambda bundle, in the fresh process this runs in (measurement 4): the time
 * to load and evaluate the bundle (require), which is what the Lambda INIT phase adds to the
 * runtime's own start. Prints {"initMs", "rssMb"} as JSON. Usage: node cold-init.cjs <bundle.js>
 * `awslambda` is the global the Node.js Lambda runtime provides (streaming handlers need it).
 */
'use strict';
globalThis.awslambda = {
  streamifyResponse: (fn) => fn,
  HttpResponseStream: { from: (stream) => stream },
};
const { performance } = require('node:perf_hooks');
const started = performance.now();
const loaded = require(process.argv[2]);
const initMs = performance.now() - started;
if (typeof loaded.handler !== 'function') {
  process.stderr.write(`${process.argv[2]} exports no handler\n`);
  process.exit(2);
}
process.stdout.write(JSON.stringify({ initMs, rssMb: process.memoryUsage().rss / 1048576 }));
