// Loads one entry point in this fresh process and builds what it builds at module load, then
// writes every module that was loaded to the log: ESM loads as the hooks saw them, CommonJS
// modules from the require cache (require() inside CJS packages bypasses the ESM hooks).
//
//   node --import tsx test/runtime/probe/probe.mjs <log> <entry.ts> [local-app | first-use]
//
// `local-app` also builds npm start's app (lib/local/app.ts buildLocalApp) from readConfig();
// `first-use` builds a runtime and uses every heavy client once (the probe's positive control).
// The `awslambda` global is the shim the tests use: streamHandle calls it at module load.
import { writeFileSync, appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';

const [log, entry, mode] = process.argv.slice(2);
writeFileSync(log, '');
register(new URL('./hooks.mjs', import.meta.url), { data: { log } });

globalThis.awslambda = {
  streamifyResponse: (fn) => fn,
  HttpResponseStream: { from: (stream) => stream },
};

const loaded = await import(pathToFileURL(entry).href);
if (mode === 'local-app') {
  const { readConfig } = await import(new URL('../../../lib/config.ts', import.meta.url).href);
  loaded.buildLocalApp(readConfig());
} else if (mode === 'first-use') {
  await firstUse(loaded);
}
// whatever an entry defers (a promise left running, a timer) has this long to load modules
await new Promise((resolve) => setTimeout(resolve, 500));
const cache = createRequire(import.meta.url).cache;
appendFileSync(log, Object.keys(cache).map((path) => `${pathToFileURL(path).href}\n`).join(''));
process.exit(0);

/** Every heavy client once: the SSM-held master key, a queued turn, a Bedrock model call. */
async function firstUse({ buildRuntime }) {
  const { readConfig } = await import(new URL('../../../lib/config.ts', import.meta.url).href);
  const runtime = buildRuntime(readConfig({
    ...process.env,
    EASEL_SSM_SECRETS: '{"PROBE": "/easel/probe"}',
    EASEL_MASTER_KEY_PARAMETER: '/easel/probe-master-key',
    EASEL_TURN_QUEUE_URL: 'http://127.0.0.1:9/123456789012/easel-probe',
    EASEL_LLM_DEFAULT_MODEL: 'bedrock:probe-model',
    EASEL_BEDROCK_ENDPOINT: 'http://127.0.0.1:9',
    EASEL_LLM_MAX_ATTEMPTS: '1',
    EASEL_LLM_TIMEOUT_MS: '1000',
  }), { logger: { info() {}, error() {} } });
  const quietly = (p) => Promise.race([p.then(() => undefined, () => undefined), new Promise((r) => setTimeout(r, 3000))]);
  await quietly(runtime.enqueue({}));
  // secrets are read when a run first needs them: the master key ring from SSM
  await quietly(runtime.secrets.serverKey('probe'));
  const chat = async () => {
    for await (const _ of runtime.models.resolve('').chat({ messages: [{ role: 'user', content: 'hi' }] })) break;
  };
  await quietly(chat());
}
