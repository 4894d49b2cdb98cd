/**
 * The knowledge service from the runtime's parts: the store, the SSRF guard, the tenants'
 * secrets and the model configuration embedding models come from. The remote backends' clients
 * are loaded on their first search, never when the runtime is built.
 */
import type { EaselConfig } from '../config';
import { createKnowledge, type KnowledgeDeps } from '../knowledge/service';
import type { KnowledgeAdmin } from '../knowledge/types';
import type { SsrfGuard } from '../outbound/ssrf';
import type { SecretResolver } from '../secrets';
import type { StoreContext } from '../store/dynamo';
import { llmSettings } from './models';

export interface KnowledgeParts {
  store: StoreContext;
  guard: SsrfGuard;
  secretsFor(tenant: string): SecretResolver;
  remote?: KnowledgeDeps['remote'];
}

export function buildKnowledge(config: Pick<EaselConfig, 'llm' | 'secrets'>, parts: KnowledgeParts): KnowledgeAdmin {
  return createKnowledge({
    store: parts.store,
    guard: parts.guard,
    secretsFor: parts.secretsFor,
    llm: llmSettings(config),
    ...(parts.remote ? { remote: parts.remote } : {}),
  });
}
