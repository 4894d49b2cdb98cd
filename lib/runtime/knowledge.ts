/**
 * The knowledge service from the runtime's parts: the store, the SSRF guard, the tenants'
 * secrets and the model configuration embedding models come from. The remote backends' clients
 * are loaded on their first search, never when the runtime is built.
 */
import type { EaselConfig } from '../config';
import { createBedrockRetriever } from '../knowledge/bedrock';
import { createRagflowRetriever } from '../knowledge/ragflow';
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
  /** @default a RAGFlow server's retrieval API and Bedrock Knowledge Bases (EASEL_BEDROCK_*) */
  remote?: KnowledgeDeps['remote'];
}

export function buildKnowledge(config: Pick<EaselConfig, 'llm' | 'secrets' | 'bedrockKnowledge'>, parts: KnowledgeParts): KnowledgeAdmin {
  return createKnowledge({
    store: parts.store,
    guard: parts.guard,
    secretsFor: parts.secretsFor,
    llm: llmSettings(config),
    remote: parts.remote ?? { ragflow: createRagflowRetriever(), bedrock: createBedrockRetriever(config.bedrockKnowledge) },
  });
}
