/**
 * Which of our modules each entry point imports, read from esbuild's metafile (every import,
 * static or dynamic, resolved as the bundler resolves it; packages left out). Only entry points
 * that serve HTTP import lib/http; lib/runtime never does; no static import reaches a heavy
 * client (those are `import()`ed on first use; lazy-clients.test.ts checks it at run time).
 */
import { join, relative } from 'node:path';
import { build, type Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const HEAVY = ['@aws-sdk/client-bedrock-runtime', '@aws-sdk/client-sqs', '@aws-sdk/client-ssm', '@aws-lambda-powertools/parameters'];

interface Graph {
  /** Our modules reachable from the entry, repository-relative. */
  modules: string[];
  /** Packages reachable through static imports only. */
  staticPackages: string[];
}

async function graph(entry: string): Promise<Graph> {
  const { metafile } = await build({
    entryPoints: [join(root, entry)],
    absWorkingDir: root,
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outdir: join(root, '.probe-out'),
    logLevel: 'silent',
  });
  const inputs = (metafile as Metafile).inputs;
  const start = relative(root, join(root, entry));
  const modules = new Set<string>();
  const staticPackages = new Set<string>();
  const walk = (path: string, staticOnly: boolean, seen: Set<string>) => {
    if (seen.has(path)) return;
    seen.add(path);
    if (!staticOnly) modules.add(path);
    for (const imported of inputs[path]?.imports ?? []) {
      if (staticOnly && imported.kind !== 'import-statement' && imported.kind !== 'require-call') continue;
      if (imported.external) {
        if (staticOnly) staticPackages.add(imported.path);
      } else walk(imported.path, staticOnly, seen);
    }
  };
  walk(start, false, new Set());
  walk(start, true, new Set());
  return { modules: [...modules].sort(), staticPackages: [...staticPackages].sort() };
}

const inHttp = (g: Graph) => g.modules.filter((m) => m.startsWith('lib/http/'));
const heavyStatic = (g: Graph) => g.staticPackages.filter((p) => HEAVY.some((h) => p === h || p.startsWith(`${h}/`)));

describe('import graph', () => {
  it.each(['functions/queue-worker.ts', 'functions/pump.ts', 'functions/session-cleanup.ts', 'lib/cli/main.ts', 'lib/local/keys-cli.ts'])(
    '%s serves no HTTP: it imports nothing of lib/http',
    async (entry) => {
      const g = await graph(entry);
      expect(g.modules).toContain(entry);
      expect(inHttp(g)).toEqual([]);
    },
  );

  it.each(['functions/http.ts', 'functions/http-stream.ts', 'functions/pump.ts', 'functions/queue-worker.ts', 'functions/session-cleanup.ts', 'lib/local/server.ts', 'bench/stack-server.ts'])(
    '%s takes its wiring from lib/runtime',
    async (entry) => {
      const g = await graph(entry);
      expect(g.modules).toContain('lib/runtime/store.ts');
    },
  );

  it('lib/runtime imports nothing of lib/http', async () => {
    const g = await graph('lib/runtime/index.ts');
    expect(g.modules).toContain('lib/runtime/engine.ts');
    expect(inHttp(g)).toEqual([]);
  });

  it.each(['functions/http.ts', 'functions/http-stream.ts', 'functions/pump.ts', 'functions/queue-worker.ts', 'functions/session-cleanup.ts', 'lib/local/server.ts'])(
    '%s reaches no heavy client through a static import',
    async (entry) => {
      const g = await graph(entry);
      expect(g.staticPackages).toContain('@aws-sdk/client-dynamodb');
      expect(heavyStatic(g)).toEqual([]);
    },
  );
});
