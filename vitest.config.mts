import { defineConfig } from 'vitest/config';

export default defineConfig({
  // test/global-setup.ts runs in Vitest's own `__vitest__` environment, which resolves the AWS
  // SDK to its ESM build (`module` field) and transforms hundreds of files (~2 s). `main` gives
  // the CJS build that Node loads natively, as in the test workers.
  environments: { __vitest__: { resolve: { mainFields: ['main'] } } },
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    // One DynamoDB Local for the whole run (or EASEL_DYNAMODB_ENDPOINT); see the file.
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 30_000,
    // Two cores: keep workers few so DynamoDB Local and servers in later suites get CPU.
    maxWorkers: 2,
  },
});
