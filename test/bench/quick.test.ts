/**
 * The benchmarks' smoke test: `npm run bench -- --quick` (tiny counts) runs every measurement
 * end to end, exits 0 and writes bench/results.json with every headline figure, so the bench
 * cannot rot. The figures themselves are not checked here (BENCHMARKS.md has a real run's).
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');

const KEYS = [
  'ideal_ratio_p50_simulated',
  'ideal_ratio_p50_local',
  'round_trips_pure',
  'round_trips_external',
  'round_trips_keyed_extra',
  'async_turn_wru',
  'cleanup_wru_per_turn',
  'write_growth_ratio',
  'ragflow_write_growth_ratio',
  'cpu_ratio_vs_langgraph',
  'init_kb_over_floor_max',
  'init_ratio_vs_floor_max',
  'cold_first_request_ratio_vs_floor',
  'cpu_ratio_vs_sdk',
  'usd_per_million_turns',
  'usd_per_million_turns_keyed',
  'quota_extra_round_trips_per_turn',
  'quota_extra_wru_per_turn',
  'quota_extra_rru_per_turn',
  'usd_per_million_turns_with_quotas',
  'knowledge_build_s',
  'knowledge_serialized_mb',
  'knowledge_load_ms',
  'knowledge_query_p50_ms',
  'knowledge_query_p95_ms',
  'knowledge_hybrid_build_s',
  'knowledge_hybrid_serialized_mb',
  'knowledge_hybrid_load_ms',
  'knowledge_hybrid_query_p50_ms',
  'knowledge_hybrid_query_p95_ms',
];

describe('npm run bench -- --quick', () => {
  it('runs every measurement and writes bench/results.json', async () => {
    // the child inherits EASEL_DYNAMODB_ENDPOINT from the test run: no second DynamoDB Local
    const { stdout } = await run('npx', ['tsx', 'bench/run.ts', '--quick'], { cwd: root, timeout: 280_000, maxBuffer: 16 * 1024 * 1024 });
    for (const title of ['1. Turn latency against the ideal protocol', '2. Round trips and write cost', '3. Engine CPU', '4. Cold start', '5. Server CPU per turn', '6. Cost per million turns', '7. Knowledge index']) {
      expect(stdout).toContain(`## ${title}`);
    }
    expect(stdout.match(/^method: /gm)).toHaveLength(7);
    const results = JSON.parse(await readFile(join(root, 'bench/results.json'), 'utf8')) as Record<string, unknown>;
    for (const key of KEYS) {
      expect(typeof results[key], key).toBe('number');
      expect(Number.isFinite(results[key]), key).toBe(true);
    }
    expect(results.round_trips_pure).toBeGreaterThan(0);
    // the cold start with its first request ran against DynamoDB, the http package's turn answered 200
    expect(stdout).toContain('cold start as a user meets it');
    expect(results.cold_first_request_ratio_vs_floor).toBeGreaterThan(0);
    // what the simulated network's figures rest on is said where they are printed
    expect(stdout).toMatch(/simulation of AWS's network latency/);
    expect(results.knowledge_chunks).toBeGreaterThan(0);
    expect(typeof results.date).toBe('string');
    expect(results.machine).toMatchObject({ cpus: expect.any(Number), cpuModel: expect.any(String), node: process.version });
    // about a minute alone (it builds every Lambda package and starts three stack servers), several on a loaded machine
  }, 300_000);
});
