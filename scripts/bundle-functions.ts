/**
 * Builds the Lambda packages: one esbuild build of every entry point as ES modules with code
 * splitting, then one zip per function holding its entry, the chunks it can reach (by static
 * or dynamic import) and their source maps, and nothing else. serverless.yml points each
 * function at its zip (`package.artifact`).
 *
 * Why not serverless-esbuild: it builds each entry on its own and zips the whole build
 * directory per function, so split chunks of every function land in every zip; a single build
 * shares chunks between entry points and the metafile says exactly which files a function needs.
 *
 * What stays off a cold start: whatever the code `import()`s on first use (the SSM, Bedrock,
 * SQS and MCP clients, PDF.js, the tokenizer, nodemailer, the playground's assets) is a chunk of
 * its own, loaded when first used. The HTTP functions also carry `openapi.json`, the API's
 * OpenAPI document generated here rather than at run time.
 *
 * Usage: `npm run bundle` (writes .bundle/). `--out=<dir>` writes elsewhere.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type BuildOptions, type Metafile, type Plugin } from 'esbuild';
import { writeZip, type ZipInput } from './zip';

const root = fileURLToPath(new URL('..', import.meta.url));

/** serverless.yml's functions and their entry points; test/deploy checks the two agree. */
export const FUNCTION_ENTRIES = {
  http: 'functions/http.ts',
  httpStream: 'functions/http-stream.ts',
  queueWorker: 'functions/queue-worker.ts',
  pump: 'functions/pump.ts',
  sessionCleanup: 'functions/session-cleanup.ts',
} as const;
export type FunctionName = keyof typeof FUNCTION_ENTRIES;

/** Functions that serve the API, and so its OpenAPI document. */
const SERVES_HTTP: ReadonlySet<FunctionName> = new Set(['http', 'httpStream']);

/**
 * zod ships its error messages in some 40 languages; Easel answers in English, so every locale
 * but English becomes an empty module.
 */
const stubZodLocales: Plugin = {
  name: 'stub-zod-locales',
  setup(b) {
    b.onResolve({ filter: /^\.\/[a-zA-Z-]+\.js$/ }, (args) =>
      args.importer.includes('/zod/v4/locales/') && args.path !== './en.js' ? { path: args.path, namespace: 'stub-zod-locale' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'stub-zod-locale' }, () => ({ contents: 'export default function () { return {}; }', loader: 'js' }));
  },
};

/**
 * The options every Lambda bundle is built with (the cold-start benchmark builds its floor with
 * the same). CommonJS packages bundled into ES modules still call `require` for Node's built-ins:
 * the banner gives each output file one.
 */
export function lambdaBuildOptions(): BuildOptions {
  return {
    absWorkingDir: root,
    bundle: true,
    minify: true,
    sourcemap: true,
    target: 'node22',
    platform: 'node',
    format: 'esm',
    splitting: true,
    mainFields: ['module', 'main'],
    outExtension: { '.js': '.mjs' },
    entryNames: 'functions/[name]',
    chunkNames: 'chunks/[name]-[hash]',
    banner: { js: "import{createRequire as __easelRequire}from'node:module';const require=__easelRequire(import.meta.url);" },
    plugins: [stubZodLocales],
    metafile: true,
    logLevel: 'warning',
  };
}

export interface BundledFunction {
  name: FunctionName;
  zip: string;
  /** Files in the zip (repository-style paths) and their sizes. */
  files: { path: string; bytes: number }[];
  /** JS files evaluated when the handler module loads (static imports only), bytes. */
  initBytes: number;
}

/** Output files reachable from `start` in the metafile: by static imports, or also by dynamic ones. */
export function reachable(metafile: Metafile, start: string, dynamic: boolean): string[] {
  const seen = new Set([start]);
  for (const file of seen) {
    for (const i of metafile.outputs[file]?.imports ?? []) {
      if (i.external) continue;
      if (i.kind === 'dynamic-import' && !dynamic) continue;
      seen.add(i.path);
    }
  }
  return [...seen];
}

export async function bundleFunctions(outDir: string, openapi: () => Promise<unknown>): Promise<BundledFunction[]> {
  const buildDir = join(outDir, 'build');
  await rm(outDir, { recursive: true, force: true });
  await mkdir(buildDir, { recursive: true });
  const result = await build({
    ...lambdaBuildOptions(),
    entryPoints: Object.values(FUNCTION_ENTRIES).map((entry) => join(root, entry)),
    outdir: buildDir,
  });
  const metafile = result.metafile!;
  const document = `${JSON.stringify(await openapi())}\n`;
  const bundled: BundledFunction[] = [];
  for (const [name, entry] of Object.entries(FUNCTION_ENTRIES) as [FunctionName, string][]) {
    const output = Object.entries(metafile.outputs).find(([, o]) => o.entryPoint === entry)?.[0];
    if (!output) throw new Error(`esbuild wrote nothing for ${entry}`);
    const inZip = (file: string) => relative(buildDir, join(root, file));
    const files: ZipInput[] = [];
    for (const js of reachable(metafile, output, true)) {
      files.push({ path: inZip(js), file: join(root, js) });
      if (metafile.outputs[`${js}.map`]) files.push({ path: `${inZip(js)}.map`, file: join(root, `${js}.map`) });
    }
    if (SERVES_HTTP.has(name)) files.push({ path: 'openapi.json', data: Buffer.from(document) });
    const zip = join(outDir, `${name}.zip`);
    const written = await writeZip(zip, files);
    const initBytes = reachable(metafile, output, false).reduce((sum, js) => sum + metafile.outputs[js]!.bytes, 0);
    bundled.push({ name, zip, files: written, initBytes });
  }
  await writeFile(join(outDir, 'metafile.json'), JSON.stringify(metafile));
  return bundled;
}

/**
 * Dependencies for an app that is built only to read its routes: the routes keep parts of them
 * (`deps.engine.store`) while registering but call nothing, and anything called throws.
 */
export function inertDeps(): { engine: never; auth: never } {
  const inert: object = new Proxy(() => undefined, {
    get: (_, key) => (key === 'then' ? undefined : inert),
    apply: () => {
      throw new Error('an app built to read its routes was called');
    },
  });
  return { engine: inert as never, auth: inert as never };
}

/** The OpenAPI document of the app, as `GET /openapi.json` would generate it. */
export async function openapiDocument(): Promise<unknown> {
  const { openapiDocumentFor } = await import('../lib/http/app');
  return openapiDocumentFor(inertDeps());
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const out = process.argv.find((a) => a.startsWith('--out='))?.slice('--out='.length) ?? join(root, '.bundle');
  const started = performance.now();
  const bundled = await bundleFunctions(out, openapiDocument);
  for (const f of bundled) {
    const zipped = f.files.reduce((sum, file) => sum + file.bytes, 0);
    console.log(`${f.name}: ${relative(root, f.zip)}, ${f.files.length} files (${(zipped / 1024).toFixed(0)} KB unzipped), ${(f.initBytes / 1024).toFixed(0)} KB loaded at init`);
  }
  console.log(`bundled in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
