import { configDefaults, defineConfig, type ViteUserConfig } from 'vitest/config';

/**
 * Suites that take about a minute or more on two cores: `npm run test:stress` runs them
 * (vitest.stress.config.mts), and CI runs that after `npm test` (.ci/run). Measured in one
 * full run: fuzz.test.ts 59.5 s, quick.test.ts (the bench's smoke run) 56.8 s.
 */
export const STRESS_SUITES = ['test/security/fuzz.test.ts', 'test/bench/quick.test.ts', 'test/knowledge/recall.test.ts'];

/** What both configurations share. */
export const shared = {
  // test/global-setup.ts runs in Vitest's own `__vitest__` environment, which resolves the AWS
  // SDK to its ESM build (`module` field) and transforms hundreds of files (~2 s). `main` gives
  // the CJS build that Node loads natively, as in the test workers.
  environments: { __vitest__: { resolve: { mainFields: ['main'] } } },
  test: {
    environment: 'node' as const,
    // One DynamoDB Local for the whole run (or EASEL_DYNAMODB_ENDPOINT); see the file.
    globalSetup: ['test/global-setup.ts'],
    // a bound for a test that hangs, not a measure of speed: tests take seconds, but on a loaded
    // two-core machine everything takes several times as long
    testTimeout: 120_000,
    // hooks bundle servers (esbuild), start processes and embedding models: seconds alone, many
    // more on a loaded two-core machine, where vitest's default of 10 s fails suites that are fine
    hookTimeout: 120_000,
    // Two cores: keep workers few so DynamoDB Local and servers in later suites get CPU.
    maxWorkers: 2,
  },
} satisfies ViteUserConfig;

export default defineConfig({
  ...shared,
  test: { ...shared.test, include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...STRESS_SUITES] },
});
