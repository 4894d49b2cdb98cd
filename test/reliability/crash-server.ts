/**
 * The app as a plain process for the crash test: configuration from the environment, served
 * on PORT, "ready" on stdout once listening. Bundled with esbuild so restarts are fast. Its
 * clock runs `argv[2]` ms ahead of the wall clock: the test starts every server a lease ahead
 * of the one it killed, so the claims a killed server left have run out for the next one.
 */
import { serve } from '@hono/node-server';
import { readConfig, readLocalConfig } from '../../lib/config';
import { createApp } from '../../lib/http/app';
import { buildDeps } from '../../lib/http/deps';

const ahead = Number(process.argv[2] ?? 0);
const clock = () => Date.now() + ahead;
const config = readConfig();
const { port } = readLocalConfig();
const deps = buildDeps(config);
deps.engine = { ...deps.engine, clock, store: { ...deps.engine.store, now: clock } };
serve({ fetch: createApp(deps).fetch, port, hostname: '127.0.0.1' }, () => {
  process.stdout.write('ready\n');
});
