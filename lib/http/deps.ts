/**
 * What the app needs beyond the runtime (lib/runtime): the authenticator and the HTTP limits
 * from the configuration. The HTTP entry points (functions/http*.ts, npm start, the bench's
 * stack server) build a runtime, then the app on it, so every one runs the same wiring.
 *
 * @example
 *   const runtime = buildRuntime(readConfig(), { logger });
 *   const app = createApp({ ...appDeps(runtime), followMaxMs: 20_000 });
 */
import type { EaselConfig } from '../config';
import { buildRuntime, type Runtime, type RuntimeOptions } from '../runtime';
import type { AppDeps } from './app';
import { createAuthenticator } from './auth';

export function appDeps(runtime: Runtime): AppDeps {
  const { config, logger } = runtime;
  return {
    engine: runtime.engine,
    guard: runtime.guard,
    asyncLeaseMs: config.queue.asyncLeaseMs,
    ...(runtime.enqueue ? { enqueue: runtime.enqueue } : {}),
    auth: createAuthenticator(runtime.store, { cacheMs: config.http.authCacheMs }),
    secrets: runtime.secrets.tenantSecrets,
    limits: { maxBodyBytes: config.http.maxBodyBytes, maxResponseBytes: config.http.maxResponseBytes, maxJsonDepth: config.http.maxJsonDepth },
    maxFieldBytes: config.http.maxFieldBytes,
    maxDslNodes: config.http.maxDslNodes,
    maxFileBytes: config.http.maxFileBytes,
    corsOrigins: config.http.corsOrigins,
    frameAncestors: config.http.frameAncestors,
    ...(logger ? { logger } : {}),
  };
}

/** A runtime and the app's dependencies on it, in one call (test servers). */
export function buildDeps(config: EaselConfig, options: RuntimeOptions = {}): AppDeps {
  return appDeps(buildRuntime(config, options));
}
