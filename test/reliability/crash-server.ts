/**
 * The app as a plain process for the crash test: configuration from the environment, served
 * on PORT, "ready" on stdout once listening. Bundled with esbuild so restarts are fast.
 */
import { serve } from '@hono/node-server';
import { readConfig, readLocalConfig } from '../../lib/config';
import { createApp } from '../../lib/http/app';
import { buildDeps } from '../../lib/http/deps';

const config = readConfig();
const { port } = readLocalConfig();
serve({ fetch: createApp(buildDeps(config)).fetch, port, hostname: '127.0.0.1' }, () => {
  process.stdout.write('ready\n');
});
