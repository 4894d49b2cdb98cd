/**
 * The knowledge service: what the APIs manage (`KnowledgeAdmin`) and what a run searches
 * (`RunKnowledge`), over the three backends. Knowledge bases and documents live in the store
 * (lib/store/knowledge.ts); `local` ones are parsed, chunked and indexed here
 * (lib/knowledge/local); `ragflow` and `bedrock` ones are searched through the remote clients
 * the host passes in.
 *
 * @example
 *   const knowledge = createKnowledge({ store, guard, secretsFor, llm: config.llm });
 *   const kb = await knowledge.create('acme', { name: 'Handbook', backend: 'local' });
 *   const { found } = await knowledge.forTenant('acme').resolve(['Handbook']);
 */
import { EaselError } from '../errors';
import type { LlmSettings } from '../llm/models';
import type { SsrfGuard } from '../outbound/ssrf';
import type { StoreContext } from '../store/dynamo';
import type { KnowledgeAdmin, RemoteRetriever } from './types';

export interface KnowledgeDeps {
  store: StoreContext;
  /** Every URL a tenant supplies (a RAGFlow server's) goes through it. */
  guard: SsrfGuard;
  /** The tenant's secrets by name (`{secret.NAME}` in a knowledge base's settings). */
  secretsFor(tenant: string): (name: string) => string | undefined | Promise<string | undefined>;
  /** The model configuration embedding models come from. */
  llm: LlmSettings;
  /** Clients of the remote backends; a knowledge base of a kind without one cannot be searched. */
  remote?: Partial<Record<'ragflow' | 'bedrock', RemoteRetriever>>;
  /** Epoch ms. @default Date.now */
  now?: () => number;
  /** Bytes of deserialized local indexes kept per process. @default DEFAULT_INDEX_CACHE_BYTES */
  indexCacheBytes?: number;
}

export function createKnowledge(deps: KnowledgeDeps): KnowledgeAdmin {
  void deps;
  const unavailable = (): never => {
    throw new EaselError('unavailable', 'knowledge bases are not available yet');
  };
  return {
    create: async () => unavailable(),
    list: async () => unavailable(),
    get: async () => unavailable(),
    update: async () => unavailable(),
    delete: async () => unavailable(),
    upload: async () => unavailable(),
    listDocuments: async () => unavailable(),
    getDocument: async () => unavailable(),
    deleteDocuments: async () => unavailable(),
    parse: async () => unavailable(),
    listChunks: async () => unavailable(),
    forTenant: () => ({ resolve: async () => unavailable(), retrieve: async () => unavailable() }),
  };
}
