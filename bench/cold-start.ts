/**
 * 4. Cold start. `npm run bundle`'s build (scripts/bundle-functions.ts) packages every Lambda
 * entry point as it is deployed; each package's handler is imported in fresh node processes
 * (interleaved) beside the floor: a handler that only creates a DocumentClient and does one
 * GetItem, built by the same function with the same options (ES modules, code splitting).
 * Reports the JS each handler evaluates at init (its module and the chunks it imports
 * statically) against the floor's, and the init time against the floor's, with the deployed
 * NODE_OPTIONS (none) and with source maps on. Then, on DynamoDB, a cold start as a user meets
 * it: init and the first request in the same fresh process, the http function's first turn of
 * a run against the floor's one GetItem (`coldFirstRequest`): what init leaves to the first
 * request (lazy chunks, the SDK's first call, code run for the first time) is counted there.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { bundleFunctions, lambdaBuildOptions, openapiDocument, reachable } from '../scripts/bundle-functions';
import { writeZip } from '../scripts/zip';
import { fmt, heading, median, ratio, shuffle, table, verdict } from './lib/stats';
import { httpApiEvent } from './lib/lambda-events';
import type { Database } from './lib/stack';
import { readZip } from './lib/zip';
import { seedBenchTenant } from './lib/tenant';
import { turnInput } from './workflow';

const run = promisify(execFile);
const here = fileURLToPath(new URL('.', import.meta.url));
const root = fileURLToPath(new URL('..', import.meta.url));

/** What a deployment's NODE_OPTIONS may turn on (serverless.yml: `--param NODE_OPTIONS=...`). */
const SOURCE_MAPS = '--enable-source-maps';

export interface ColdStartOptions {
  /** Fresh processes per package and setting. */
  reps: number;
  /** Fresh processes per package for init and the first request. */
  firstRequestReps: number;
}

export interface BundleResult {
  name: string;
  handler: string;
  /** JS evaluated when the handler module loads: its file and the chunks it imports statically. */
  initKb: number;
  /** Every JS file in the package (lazy chunks included), without source maps. */
  jsKb: number;
  zipKb: number;
  /** Module init, median, as deployed (no NODE_OPTIONS). */
  initMs: number;
  /** Module init, median, with source maps on. */
  initMsSourceMaps: number;
  rssMb: number;
}

export interface ColdStartResult {
  bundleMs: number;
  floor: BundleResult;
  functions: BundleResult[];
  initKbOverFloorMax: number;
  initRatioMax: number;
  initRatioSourceMapsMax: number;
  /** What the worst function's init loads, by package (KB, esbuild's metafile). */
  contributors: { name: string; kb: number }[];
  /** Init and the first request in one fresh process (on DynamoDB; absent when it did not run). */
  firstRequest?: FirstRequestResult;
}

/** The unpacked packages measurement 4 built, kept for `coldFirstRequest` until `dispose`. */
export interface ColdStartRun {
  result: ColdStartResult;
  handlers: { http: string; floor: string };
  dispose(): Promise<void>;
}

export interface FirstRequestResult {
  reps: number;
  /** Medians: module init, the first request, and the two in one process (per-run sums). */
  http: { initMs: number; firstMs: number; totalMs: number };
  floor: { initMs: number; firstMs: number; totalMs: number };
  /** http's init + first turn over the floor's init + first GetItem. */
  ratio: number;
}

/** A measured child's environment: Lambda's region and credentials, nothing of this process's but PATH. */
function childEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'bench',
    AWS_SECRET_ACCESS_KEY: 'bench',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    EASEL_DYNAMODB_TABLE: 'easel-bench',
    POWERTOOLS_SERVICE_NAME: 'easel',
    ...extra,
  };
}

async function initOnce(file: string, nodeOptions: string): Promise<{ initMs: number; rssMb: number }> {
  const env = childEnv(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {});
  const { stdout } = await run(process.execPath, [join(here, 'cold-init.mjs'), file], { env, timeout: 30_000 });
  return JSON.parse(stdout) as { initMs: number; rssMb: number };
}

type Metafile = NonNullable<Awaited<ReturnType<typeof build>>['metafile']>;

/** KB per package (node_modules/<pkg>, our code as one) in the files the handler evaluates at init. */
function contributors(metafile: Metafile, output: string): { name: string; kb: number }[] {
  const bytes = new Map<string, number>();
  for (const file of reachable(metafile, output, false)) {
    for (const [path, { bytesInOutput }] of Object.entries(metafile.outputs[file]!.inputs)) {
      const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
      const name = m ? m[1]! : 'easel (lib/, functions/)';
      bytes.set(name, (bytes.get(name) ?? 0) + bytesInOutput);
    }
  }
  return [...bytes].map(([name, b]) => ({ name, kb: b / 1024 })).sort((a, b) => b.kb - a.kb);
}

export async function coldStart(options: ColdStartOptions): Promise<ColdStartRun> {
  heading(
    '4. Cold start',
    `\`npm run bundle\` packages each entry point (ES modules, shared code in chunks, a zip per function holding what it can load); floor = bench/floor/handler.ts (DocumentClient + one GetItem) built with the same options; init KB = the JS a handler evaluates when its module loads (its file and the chunks it imports statically; lazy chunks load on first use); module init = import() of the unzipped package's handler in a fresh \`node\` (${process.version}) process, median of ${options.reps} per package and setting, all runs interleaved in random order, as deployed (no NODE_OPTIONS) and with ${SOURCE_MAPS}.`,
  );
  const dir = await mkdtemp(join(tmpdir(), 'easel-bench-bundle-'));
  const dispose = () => rm(dir, { recursive: true, force: true });
  try {
    const started = performance.now();
    const bundled = await bundleFunctions(join(dir, 'out'), openapiDocument);
    const bundleMs = performance.now() - started;
    const metafile = JSON.parse(await readFile(join(dir, 'out', 'metafile.json'), 'utf8')) as Metafile;

    interface Package { name: string; handler: string; file: string; initBytes: number; jsBytes: number; zipBytes: number; output?: string }
    const packages: Package[] = [];
    for (const f of bundled) {
      const root = join(dir, 'unpacked', f.name);
      const entries = readZip(f.zip);
      for (const e of entries) {
        const target = join(root, e.name);
        await mkdir(dirname(target), { recursive: true });
        await writeFile(target, e.data());
      }
      const handlerFile = entries.find((e) => e.name.startsWith('functions/') && e.name.endsWith('.mjs'))!.name;
      const output = Object.entries(metafile.outputs).find(([, o]) => o.entryPoint === `functions/${handlerFile.slice('functions/'.length, -'.mjs'.length)}.ts`)?.[0];
      packages.push({
        name: f.name,
        handler: `${handlerFile.slice(0, -'.mjs'.length)}.handler`,
        file: join(root, handlerFile),
        initBytes: f.initBytes,
        jsBytes: f.files.filter((file) => file.path.endsWith('.mjs')).reduce((sum, file) => sum + file.bytes, 0),
        zipBytes: (await stat(f.zip)).size,
        ...(output ? { output } : {}),
      });
    }
    const floorDir = join(dir, 'floor');
    const floorBuild = await build({ ...lambdaBuildOptions(), entryPoints: [join(here, 'floor/handler.ts')], outdir: floorDir, entryNames: '[name]' });
    const floorOutputs = floorBuild.metafile!.outputs;
    const floorEntry = Object.keys(floorOutputs).find((o) => floorOutputs[o]!.entryPoint)!;
    const floorJs = Object.entries(floorOutputs).filter(([o]) => o.endsWith('.mjs'));
    // zipped as the functions are: every file it wrote, maps included
    const floorZip = join(dir, 'floor.zip');
    await writeZip(floorZip, Object.keys(floorOutputs).map((o) => ({ path: relative(floorDir, join(root, o)), file: join(root, o) })));
    packages.push({
      name: 'floor',
      handler: 'bench/floor/handler.handler',
      file: join(floorDir, 'handler.mjs'),
      initBytes: reachable(floorBuild.metafile!, floorEntry, false).reduce((sum, o) => sum + floorOutputs[o]!.bytes, 0),
      jsBytes: floorJs.reduce((sum, [, o]) => sum + o.bytes, 0),
      zipBytes: (await stat(floorZip)).size,
    });

    const settings = ['', SOURCE_MAPS];
    const samples = new Map<string, { initMs: number; rssMb: number }[]>();
    const tasks = packages.flatMap((p) => settings.map((s) => ({ p, s })));
    for (let rep = 0; rep < options.reps; rep++) {
      for (const { p, s } of shuffle([...tasks])) {
        const key = `${p.name}\u0000${s}`;
        const list = samples.get(key) ?? [];
        list.push(await initOnce(p.file, s));
        samples.set(key, list);
      }
    }
    const results = packages.map((p): BundleResult => {
      const plain = samples.get(`${p.name}\u0000`) ?? [];
      return {
        name: p.name,
        handler: p.handler,
        initKb: p.initBytes / 1024,
        jsKb: p.jsBytes / 1024,
        zipKb: p.zipBytes / 1024,
        initMs: median(plain.map((x) => x.initMs)),
        initMsSourceMaps: median((samples.get(`${p.name}\u0000${SOURCE_MAPS}`) ?? []).map((x) => x.initMs)),
        rssMb: median(plain.map((x) => x.rssMb)),
      };
    });
    const floor = results.find((r) => r.name === 'floor')!;
    const functions = results.filter((r) => r !== floor);
    table(
      ['package', 'handler', 'init KB', 'over floor KB', 'all JS KB', 'zip KB', 'init p50 ms', 'x floor', `init p50 ms (${SOURCE_MAPS})`, 'x floor ', 'RSS MB'],
      results.map((r) => [r.name, r.handler, r.initKb, r.initKb - floor.initKb, r.jsKb, r.zipKb, r.initMs, ratio(r.initMs, floor.initMs), r.initMsSourceMaps, ratio(r.initMsSourceMaps, floor.initMsSourceMaps), r.rssMb]),
    );
    const worst = functions.reduce((a, b) => (b.initKb > a.initKb ? b : a));
    const worstOutput = packages.find((p) => p.name === worst.name)?.output;
    const top = worstOutput ? contributors(metafile, worstOutput) : [];
    console.log(`what ${worst.name} loads at init (KB, esbuild metafile): ${top.slice(0, 12).map((c) => `${c.name} ${fmt(c.kb, 0)}`).join(', ')}`);
    const result: ColdStartResult = {
      bundleMs,
      floor,
      functions,
      initKbOverFloorMax: Math.max(...functions.map((f) => f.initKb - floor.initKb)),
      initRatioMax: Math.max(...functions.map((f) => ratio(f.initMs, floor.initMs))),
      initRatioSourceMapsMax: Math.max(...functions.map((f) => ratio(f.initMsSourceMaps, floor.initMsSourceMaps))),
      contributors: top,
    };
    console.log(`npm run bundle took ${fmt(bundleMs / 1000, 1)} s`);
    console.log(`target init <= 1.5x floor: ${verdict(result.initRatioMax, '<=', 1.5)} (with source maps: x${fmt(result.initRatioSourceMapsMax)})`);
    console.log(`target init KB <= floor + 400: ${verdict(result.initKbOverFloorMax, '<=', 400)}`);
    const handlerOf = (name: string) => packages.find((p) => p.name === name)!.file;
    return { result, handlers: { http: handlerOf('http'), floor: handlerOf('floor') }, dispose };
  } catch (error) {
    await dispose();
    throw error;
  }
}

/**
 * Init and the first request of the http package (the first turn of a run of the bench
 * workflow, through its own handler with an API Gateway v2 event) beside the floor's (its one
 * GetItem), each in fresh processes, interleaved; `reps` of each. Adds to `cold.result`.
 */
export async function coldFirstRequest(cold: ColdStartRun, db: Database, reps: number): Promise<FirstRequestResult> {
  const { secret, workflowId } = await seedBenchTenant({ doc: db.doc, table: db.table }, 'cold start');
  const env = childEnv({
    // Easel's setting, and the SDK's own for the floor's client
    EASEL_DYNAMODB_ENDPOINT: db.endpoint,
    AWS_ENDPOINT_URL_DYNAMODB: db.endpoint,
    EASEL_DYNAMODB_TABLE: db.table,
  });
  const once = async (file: string, event: unknown): Promise<{ initMs: number; firstMs: number }> => {
    const { stdout } = await run(process.execPath, [join(here, 'cold-request.mjs'), file], {
      env: { ...env, ...(event ? { COLD_EVENT: JSON.stringify(event) } : {}) },
      timeout: 60_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    // the handler's own logs come first
    return JSON.parse(stdout.trim().split('\n').at(-1)!) as { initMs: number; firstMs: number };
  };
  const samples: Record<'http' | 'floor', { initMs: number; firstMs: number }[]> = { http: [], floor: [] };
  for (let rep = 0; rep < reps; rep++) {
    for (const name of shuffle(['http', 'floor'] as const)) {
      const event = name === 'http'
        ? httpApiEvent('POST', `/workflows/v1/workflows/${workflowId}/execute`, { headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify({ run_input: turnInput(1) }) })
        : undefined;
      samples[name].push(await once(cold.handlers[name], event));
    }
  }
  const summary = (list: { initMs: number; firstMs: number }[]) => ({
    initMs: median(list.map((x) => x.initMs)),
    firstMs: median(list.map((x) => x.firstMs)),
    totalMs: median(list.map((x) => x.initMs + x.firstMs)),
  });
  const http = summary(samples.http);
  const floor = summary(samples.floor);
  const result: FirstRequestResult = { reps, http, floor, ratio: ratio(http.totalMs, floor.totalMs) };
  console.log(`\ncold start as a user meets it: init and the first request in one fresh process (DynamoDB: ${db.description}), median of ${reps} each, interleaved; http = the first turn of a run of the bench workflow through functions/http.ts's handler (API Gateway v2 event); floor = its one GetItem`);
  table(
    ['package', 'init p50 ms', 'first request p50 ms', 'init + first request p50 ms', 'x floor'],
    [
      ['http', http.initMs, http.firstMs, http.totalMs, result.ratio],
      ['floor', floor.initMs, floor.firstMs, floor.totalMs, 1],
    ],
  );
  cold.result.firstRequest = result;
  return result;
}
