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
import { EmbedSecrets } from '../secrets/embed-secrets';
import { type AccessTokens, accessTokens } from './access';
import { createAuthenticator } from './auth';
import { forwardedFor, lambdaSourceIp } from './client-address';

export function appDeps(runtime: Runtime): AppDeps {
  const { config, logger } = runtime;
  const serverKey = (purpose: string) => runtime.secrets.serverKey(purpose);
  const access: AccessTokens = accessTokens(serverKey);
  const embedSecrets = new EmbedSecrets(runtime.secrets.tenantSecrets, { cacheMs: config.http.authCacheMs });
  return {
    engine: runtime.engine,
    knowledge: runtime.knowledge,
    ...(runtime.mcp ? { mcp: runtime.mcp } : {}),
    guard: runtime.guard,
    asyncLeaseMs: config.queue.asyncLeaseMs,
    ...(runtime.enqueue ? { enqueue: runtime.enqueue } : {}),
    auth: createAuthenticator(runtime.store, { cacheMs: config.http.authCacheMs, runTokens: access.runTokens, embedSecrets }),
    access,
    embedSecrets,
    secrets: runtime.secrets.tenantSecrets,
    limits: { maxBodyBytes: config.http.maxBodyBytes, maxResponseBytes: config.http.maxResponseBytes, maxJsonDepth: config.http.maxJsonDepth },
    maxFieldBytes: config.http.maxFieldBytes,
    maxDslNodes: config.http.maxDslNodes,
    maxFileBytes: config.http.maxFileBytes,
    corsOrigins: config.http.corsOrigins,
    ...(config.http.publicUrl ? { publicUrl: config.http.publicUrl } : {}),
    ...(config.http.formBaseUrl ? { formBaseUrl: config.http.formBaseUrl } : {}),
    frameAncestors: config.http.frameAncestors,
    // on Lambda; npm start replaces it with the socket's (lib/local/app.ts)
    clientAddress: forwardedFor(lambdaSourceIp, config.http.trustedProxyHops),
    ...(logger ? { logger } : {}),
  };
}

/** A runtime and the app's dependencies on it, in one call (test servers). */
export function buildDeps(config: EaselConfig, options: RuntimeOptions = {}): AppDeps {
  return appDeps(buildRuntime(config, options));
}
