import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
    // Two cores: keep workers few so DynamoDB Local and servers in later suites get CPU.
    maxWorkers: 2,
  },
});
