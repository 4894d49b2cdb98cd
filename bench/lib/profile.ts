/**
 * Where a measured process's time went (the stack server, the Lambda handler's driver), from
 * the V8 CPU profile BENCH_PROFILE=<dir> makes it write: samples grouped by the innermost frame
 * that belongs to a package or to our code (node's own frames count for their caller), idle
 * time and the bench's own calls left out (as far as they are on the stack: the part of a bare
 * replay that runs after an `await` is not, and counts for the SDK).
 * V8 samples the main thread's wall time, so this is a breakdown, not a CPU measurement.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, table } from './stats';

/** The bench's own DynamoDB calls inside a measured process (bare replays, mirror upkeep): left out. */
const HARNESS_CALLS = new Set(['replay', 'syncHead']);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

function category(url: string, functionName: string): string | null {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) {
    const pkg = m[1] as string;
    if (pkg.startsWith('@aws-sdk/') || pkg.startsWith('@smithy/')) return 'AWS SDK (marshalling, signing, HTTP)';
    if (pkg === 'hono' || pkg.startsWith('@hono/')) return 'Hono + @hono/node-server';
    if (pkg === 'zod' || pkg === '@asteasolutions/zod-to-openapi') return 'zod';
    if (pkg.startsWith('@aws-lambda-powertools/')) return 'Powertools logger + metrics';
    if (pkg === 'tsx' || pkg === 'esbuild') return 'tsx (TypeScript loader)';
    return pkg;
  }
  if (url.includes('node:zlib') || url.endsWith('zlib.js')) return 'brotli (node:zlib)';
  if (/\/lib\/(canvas|components)\//.test(url)) return 'Easel engine (lib/canvas, lib/components)';
  if (/\/lib\/store\//.test(url)) return 'Easel store (lib/store)';
  if (/\/lib\/(turns|http|config|llm|outbound)/.test(url) || /\/functions\//.test(url)) return 'Easel turns + HTTP (lib/turns, lib/http)';
  if (/\/bench\//.test(url)) return 'bench harness (trace recording)';
  if (functionName === '(garbage collector)') return 'garbage collector';
  return null;
}

/** Prints the breakdown of the largest profile in `dir` (the main thread of the process `label` names). */
export function reportProfile(dir: string, label: string): void {
  if (!existsSync(dir)) return;
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).map((f) => join(dir, f));
  if (files.length === 0) return;
  const file = files.sort((a, b) => statSync(b).size - statSync(a).size)[0] as string;
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const time = new Map<number, number>();
  profile.samples.forEach((id, i) => time.set(id, (time.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const by = new Map<string, number>();
  let total = 0;
  for (const [id, us] of time) {
    const leaf = nodes.get(id) as ProfileNode;
    if (['(idle)', '(program)'].includes(leaf.callFrame.functionName)) continue;
    let found: string | null = null;
    let replaying = false;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = (nodes.get(at) as ProfileNode).callFrame;
      if (HARNESS_CALLS.has(frame.functionName) && frame.url.includes('/bench/')) replaying = true;
      found ??= category(frame.url, frame.functionName);
    }
    if (replaying) continue;
    const name = found ?? 'node core (http server, sockets, streams)';
    by.set(name, (by.get(name) ?? 0) + us);
    total += us;
  }
  console.log(`\n${label} profile (${file}): main-thread time outside the bench's own calls, by the innermost package or module on the stack (V8 samples wall time: read shares, not milliseconds)`);
  table(['where', 'share'], [...by].sort((a, b) => b[1] - a[1]).map(([name, us]) => [name, `${fmt((100 * us) / total, 1)}%`]));
}
