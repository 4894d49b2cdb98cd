/**
 * The turn engine (lib/turns) from its parts: the store, the built-in components, the services
 * components call out through (models, the SSRF guard, the tenant's secrets, knowledge bases and MCP servers,
 * the built-in Agent tools with the configured endpoints), the configured budgets
 * and the quotas (none unless EASEL_QUOTA_* sets one).
 */
import { builtinComponents } from '../components';
import { services } from '../components/services';
import type { EaselConfig } from '../config';
import type { ModelResolver } from '../llm/models';
import type { SsrfGuard } from '../outbound/ssrf';
import type { RunKnowledge } from '../knowledge/types';
import type { RunMcp } from '../mcp/types';
import type { StoreContext } from '../store/dynamo';
import type { TurnEngine } from '../turns/execute';
import type { TurnLifecycle } from '../turns/lifecycle';
import type { SecretResolver } from '../secrets';
import { builtinToolKindsWith, createToolRegistry } from '../tools/registry';

export interface EngineParts {
  store: StoreContext;
  models: ModelResolver;
  guard: SsrfGuard;
  /** `{secret.NAME}` for one tenant's runs. */
  secretsFor(tenant: string): SecretResolver;
  /** The knowledge bases of one tenant's runs (Retrieval); absent: runs have none. */
  knowledge?: { forTenant(tenant: string): RunKnowledge };
  /** The MCP servers of one tenant's runs (an Agent's `mcp` entries); absent: runs have none, and such an Agent fails saying so. */
  mcp?: { forTenant(tenant: string): RunMcp };
  /** What stops the entry point's turns (shutdown, an invocation's deadline); lib/runtime/lifecycle.ts. */
  lifecycle?: TurnLifecycle;
  /** See TurnEngine `afterResponse`. */
  afterResponse?: TurnEngine['afterResponse'];
}

export function buildEngine(config: Pick<EaselConfig, 'store' | 'stepBudgetTurn' | 'stepBudgetRun' | 'quotas' | 'tools'>, parts: EngineParts): TurnEngine {
  // the same kinds the loader knows (builtinComponents), with the operator's endpoints
  const tools = createToolRegistry(builtinToolKindsWith({ baseUrls: config.tools.baseUrls }));
  return {
    store: parts.store,
    registry: builtinComponents,
    // without a tenant, no secret resolves
    services: services({ models: parts.models, guard: parts.guard, tools }),
    servicesFor: (tenant) => services({
      models: parts.models,
      guard: parts.guard,
      tools,
      secret: parts.secretsFor(tenant),
      ...(parts.knowledge ? { knowledge: parts.knowledge.forTenant(tenant) } : {}),
      ...(parts.mcp ? { mcp: parts.mcp.forTenant(tenant) } : {}),
    }),
    leaseMs: config.store.leaseMs,
    listingRefreshMs: config.store.listingRefreshMs,
    sessionTtlSeconds: config.store.sessionTtlSeconds,
    replayTtlSeconds: config.store.replayTtlSeconds,
    stepBudgetTurn: config.stepBudgetTurn,
    stepBudgetRun: config.stepBudgetRun,
    ...(config.quotas ? { quotas: config.quotas } : {}),
    ...(parts.lifecycle ? { lifecycle: parts.lifecycle } : {}),
    ...(parts.afterResponse ? { afterResponse: parts.afterResponse } : {}),
  };
}
