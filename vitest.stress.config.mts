/** `npm run test:stress`: the suites too long for `npm test` (STRESS_SUITES in vitest.config.mts). */
import { defineConfig } from 'vitest/config';
import { shared, STRESS_SUITES } from './vitest.config.mjs';

export default defineConfig({ ...shared, test: { ...shared.test, include: STRESS_SUITES } });
