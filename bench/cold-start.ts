/**
 * 4. Cold start. `serverless package` builds every Lambda entry point as it would deploy them;
 * each bundle's size, and its module-init time in fresh node processes (interleaved), beside
 * the floor: a handler that only creates a DocumentClient and does one GetItem, bundled with
 * the same esbuild options (read from the packaged service's own state).
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { deflateRawSync } from 'node:zlib';
import { build, type BuildOptions, type Plugin } from 'esbuild';
import { fmt, heading, median, ratio, shuffle, table, verdict } from './lib/stats';
import { readZip } from './lib/zip';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));

export interface ColdStartOptions {
  /** Fresh processes per bundle and setting. */
  reps: number;
}

export interface BundleResult {
  name: string;
  /** A variant built by the bench to size a remedy, not a deployed function. */
  whatIf: boolean;
  handler: string;
  jsKb: number;
  zipKb: number;
  /** Module init, median, with NODE_OPTIONS as serverless.yml deploys it. */
  initMs: number;
  /** Module init, median, without NODE_OPTIONS (no source maps). */
  initMsPlain: number;
  rssMb: number;
}

export interface ColdStartResult {
  packageMs: number;
  nodeOptions: string;
  floor: BundleResult;
  functions: BundleResult[];
  bundleKbOverFloorMax: number;
  initRatioMax: number;
  initRatioPlainMax: number;
  /** Largest contributors to the http bundle (KB), from esbuild's metafile. */
  contributors: { name: string; kb: number }[];
}

interface ServerlessState {
  service: {
    custom?: { esbuild?: Record<string, unknown> };
    provider: { runtime: string; environment?: Record<string, unknown> };
    functions: Record<string, { handler: string }>;
  };
}

/** serverless-esbuild's options minus its own keys, as its bundle step hands them to esbuild. */
function esbuildOptionsOf(state: ServerlessState, serviceDir: string): BuildOptions {
  const custom = { ...(state.service.custom?.esbuild ?? {}) } as Record<string, unknown>;
  // `plugins` names a module of the service that exports the plugin array
  if (typeof custom.plugins === 'string') custom.plugins = createRequire(join(serviceDir, 'package.json'))(join(serviceDir, custom.plugins)) as Plugin[];
  const pluginOnly = ['concurrency', 'zipConcurrency', 'exclude', 'nativeZip', 'packager', 'packagePath', 'watch', 'keepOutputDirectory', 'packagerOptions', 'installExtraArgs', 'outputFileExtension', 'outputBuildFolder', 'outputWorkFolder', 'nodeExternals', 'skipBuild', 'skipRebuild', 'skipBuildExcludeFns', 'stripEntryResolveExtensions', 'disposeContext', 'config'];
  const exclude = (custom.exclude as string[] | undefined) ?? ['aws-sdk'];
  const external = [...((custom.external as string[] | undefined) ?? []), ...(exclude.includes('*') ? [] : exclude)];
  for (const key of pluginOnly) delete custom[key];
  const runtime = /^nodejs(\d+)\.x$/.exec(state.service.provider.runtime)?.[1];
  return { bundle: true, platform: 'node', ...(runtime ? { target: `node${runtime}` } : {}), ...custom, external, logLevel: 'silent' } as BuildOptions;
}

/**
 * `serverless package` on a copy of the service (its sources and serverless.yml, the same
 * node_modules): serverless-esbuild works in `.esbuild/` of the service directory, which a
 * concurrent packaging in the repository (the deploy test) would share.
 */
async function packageService(dir: string, out: string): Promise<void> {
  const service = join(dir, 'service');
  await mkdir(service);
  const skip = new Set(['node_modules', '.git', '.esbuild', '.serverless', '.easel', 'coverage', 'test', 'bench']);
  for (const entry of await readdir(root)) {
    if (!skip.has(entry)) await cp(join(root, entry), join(service, entry), { recursive: true });
  }
  await symlink(join(root, 'node_modules'), join(service, 'node_modules'), 'dir');
  const scratch = join(dir, 'tmp');
  await mkdir(scratch);
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!/^(AWS_|EASEL_|POWERTOOLS_)/.test(name)) env[name] = value;
  Object.assign(env, {
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    AWS_CONFIG_FILE: join(dir, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: join(dir, 'no-aws-credentials'),
    SLS_TELEMETRY_DISABLED: '1',
    // the bundler's work folders go inside `dir`, removed with it
    TMPDIR: scratch,
  });
  await run('npx', ['serverless', 'package', '--package', out], { cwd: service, env, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 });
}

/** Rarely used providers left out, as if each were a chunk loaded on first use (or its own function). */
const RARE = ['@aws-sdk/client-ssm', '@aws-sdk/client-bedrock-runtime', '@aws-sdk/client-sqs', '@aws-lambda-powertools/parameters'];
const stubRareProviders: Plugin = {
  name: 'stub-rare-providers',
  setup(b) {
    b.onResolve({ filter: /^@aws-(sdk|lambda-powertools)\// }, (a) => (RARE.some((r) => a.path === r || a.path.startsWith(`${r}/`)) ? { path: a.path, namespace: 'stub-rare' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'stub-rare' }, () => ({ contents: 'module.exports = new Proxy({}, { get: () => class {} });', loader: 'js' }));
  },
};

async function initOnce(bundle: string, nodeOptions: string): Promise<{ initMs: number; rssMb: number }> {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    EASEL_DYNAMODB_TABLE: 'easel-bench',
    POWERTOOLS_SERVICE_NAME: 'easel',
    ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
  };
  const { stdout } = await run(process.execPath, [join(here, 'cold-init.cjs'), bundle], { env, timeout: 30_000 });
  return JSON.parse(stdout) as { initMs: number; rssMb: number };
}

/** Bytes in the bundle per package (node_modules/<pkg>), with zod's locales apart and our code as one. */
async function contributors(entry: string, options: BuildOptions): Promise<{ name: string; kb: number }[]> {
  const result = await build({ ...options, entryPoints: [entry], write: false, metafile: true, outdir: join(tmpdir(), 'easel-bench-meta'), sourcemap: false });
  const bytes = new Map<string, number>();
  for (const output of Object.values(result.metafile.outputs)) {
    for (const [path, { bytesInOutput }] of Object.entries(output.inputs)) {
      let name = 'easel (lib/, functions/)';
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)(\/.*)?$/.exec(path);
      if (m) name = m[1] === 'zod' && /\/locales\//.test(m[2] ?? '') ? 'zod (locales)' : (m[1] as string);
      bytes.set(name, (bytes.get(name) ?? 0) + bytesInOutput);
    }
  }
  return [...bytes].map(([name, b]) => ({ name, kb: b / 1024 })).sort((a, b) => b.kb - a.kb);
}

export async function coldStart(options: ColdStartOptions): Promise<ColdStartResult> {
  heading(
    '4. Cold start',
    `\`npx serverless package\` (offline, on a copy of the service) builds each entry point; bundle = the handler's .js in its zip (minified; the zip adds the source map; the floor's zip size is its .js + map deflated); floor = bench/floor/handler.ts (DocumentClient + one GetItem) built with the same esbuild options; module init = require() of the bundle in a fresh \`node\` (${process.version}) process, median of ${options.reps} per bundle and setting, all runs interleaved in random order, with serverless.yml's NODE_OPTIONS and without.`,
  );
  const dir = await mkdtemp(join(tmpdir(), 'easel-bench-package-'));
  try {
    const started = performance.now();
    const out = join(dir, 'package');
    await packageService(dir, out);
    const packageMs = performance.now() - started;
    const state = JSON.parse(await readFile(join(out, 'serverless-state.json'), 'utf8')) as ServerlessState;
    const esbuildOptions = esbuildOptionsOf(state, join(dir, 'service'));
    const nodeOptions = String(state.service.provider.environment?.NODE_OPTIONS ?? '');

    interface Bundle { name: string; handler: string; js: string; jsBytes: number; zipBytes: number; whatIf?: boolean }
    const bundles: Bundle[] = [];
    for (const [name, fn] of Object.entries(state.service.functions)) {
      const zipPath = join(out, `${name}.zip`);
      const file = `${fn.handler.slice(0, fn.handler.lastIndexOf('.'))}.js`;
      const entries = readZip(zipPath);
      const js = entries.find((e) => e.name === file);
      if (!js) throw new Error(`${name}.zip has no ${file}`);
      for (const e of entries) {
        const out = join(dir, 'unpacked', name, e.name);
        await mkdir(dirname(out), { recursive: true });
        await writeFile(out, e.data());
      }
      bundles.push({ name, handler: fn.handler, js: join(dir, 'unpacked', name, file), jsBytes: js.size, zipBytes: (await stat(zipPath)).size });
    }
    const floorDir = join(dir, 'floor');
    await build({ ...esbuildOptions, entryPoints: [join(here, 'floor/handler.ts')], outdir: floorDir });
    const floorJs = join(floorDir, 'handler.js');
    // what its zip would weigh: the .js and its map, deflated as zip entries are
    const floorZipBytes = deflateRawSync(await readFile(floorJs)).length + deflateRawSync(await readFile(`${floorJs}.map`).catch(() => Buffer.alloc(0))).length;
    bundles.push({ name: 'floor', handler: relative(root, join(here, 'floor/handler.handler')), js: floorJs, jsBytes: (await stat(floorJs)).size, zipBytes: floorZipBytes });
    // what-ifs: the http function with remedies applied, to size them (never deployed)
    const httpEntry = join(dir, 'service/functions/http.ts');
    const variants: [string, Plugin[]][] = [['http what-if: SSM/Bedrock/SQS/Parameters out', [...(esbuildOptions.plugins ?? []), stubRareProviders]]];
    for (const [i, [name, plugins]] of variants.entries()) {
      const outdir = join(dir, `what-if-${i}`);
      await build({ ...esbuildOptions, entryPoints: [httpEntry], outdir, plugins });
      const js = join(outdir, 'http.js');
      const zipBytes = deflateRawSync(await readFile(js)).length + deflateRawSync(await readFile(`${js}.map`).catch(() => Buffer.alloc(0))).length;
      bundles.push({ name, handler: 'functions/http.handler', js, jsBytes: (await stat(js)).size, zipBytes, whatIf: true });
    }

    const settings = [nodeOptions, ''];
    const samples = new Map<string, { initMs: number; rssMb: number }[]>();
    const tasks = bundles.flatMap((b) => settings.map((s) => ({ b, s })));
    for (let rep = 0; rep < options.reps; rep++) {
      for (const { b, s } of shuffle([...tasks])) {
        const key = `${b.name}\u0000${s}`;
        const list = samples.get(key) ?? [];
        list.push(await initOnce(b.js, s));
        samples.set(key, list);
      }
    }
    const results = bundles.map((b): BundleResult => {
      const withOptions = samples.get(`${b.name}\u0000${nodeOptions}`) ?? [];
      const plain = samples.get(`${b.name}\u0000`) ?? [];
      return {
        name: b.name,
        whatIf: b.whatIf === true,
        handler: b.handler,
        jsKb: b.jsBytes / 1024,
        zipKb: b.zipBytes / 1024,
        initMs: median(withOptions.map((x) => x.initMs)),
        initMsPlain: median(plain.map((x) => x.initMs)),
        rssMb: median(plain.map((x) => x.rssMb)),
      };
    });
    const floor = results.find((r) => r.name === 'floor') as BundleResult;
    const functions = results.filter((r) => r !== floor && !r.whatIf);
    table(
      ['bundle', 'handler', 'JS KB', 'zip KB', 'JS over floor KB', `init p50 ms (${nodeOptions || 'no NODE_OPTIONS'})`, 'x floor', 'init p50 ms (plain)', 'x floor ', 'RSS MB'],
      results.map((r) => [r.name, r.handler, r.jsKb, r.zipKb, r.jsKb - floor.jsKb, r.initMs, ratio(r.initMs, floor.initMs), r.initMsPlain, ratio(r.initMsPlain, floor.initMsPlain), r.rssMb]),
    );
    const top = await contributors(httpEntry, esbuildOptions);
    console.log('(what-if rows: the http function rebuilt with a remedy applied, measured alike; not deployed, not in the targets)');
    console.log(`largest parts of the http bundle (KB, esbuild metafile): ${top.slice(0, 10).map((c) => `${c.name} ${fmt(c.kb, 0)}`).join(', ')}`);
    const result: ColdStartResult = {
      packageMs,
      nodeOptions,
      floor,
      functions,
      bundleKbOverFloorMax: Math.max(...functions.map((f) => f.jsKb - floor.jsKb)),
      initRatioMax: Math.max(...functions.map((f) => ratio(f.initMs, floor.initMs))),
      initRatioPlainMax: Math.max(...functions.map((f) => ratio(f.initMsPlain, floor.initMsPlain))),
      contributors: top,
    };
    console.log(`serverless package took ${fmt(packageMs / 1000, 1)} s; ${basename(dir)} removed afterwards`);
    console.log(`target init <= 1.25x floor: ${verdict(result.initRatioMax, '<=', 1.25)} (without source maps: x${fmt(result.initRatioPlainMax)})`);
    console.log(`target bundle <= floor + 400 KB: ${verdict(result.bundleKbOverFloorMax, '<=', 400)}`);
    return result;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
