/**
 * Bearer API keys. A presented key is looked up by its hash; results are cached per container
 * for `cacheMs` (so a revocation takes effect within that time, plus the request in flight).
 * `admin` keys act on everything of their tenant; `execute` keys only on their workflows.
 */
import { findApiKey, type ApiKey } from '../store/api-keys';
import type { StoreContext } from '../store/dynamo';
import { HttpError } from './errors';

export interface Principal {
  tenant: string;
  keyId: string;
  scope: ApiKey['scope'];
  workflowIds: readonly string[];
  /** An execute key's end user, asserted by a valid end-user token signed with the tenant's embed secret. */
  endUser?: EndUser;
  /** The run a valid run token opens to an execute key. */
  runId?: string;
}

export interface EndUser {
  /** The token's `sub`: a client-sent `user_id` never overrides it. */
  id: string;
  /** The workflows the token names (within the key's). */
  workflowIds: readonly string[];
}

export interface Authenticator {
  authenticate(header: string | undefined): Promise<Principal>;
}

export const DEFAULT_AUTH_CACHE_MS = 30_000;

export function createAuthenticator(store: StoreContext, options: { cacheMs?: number; now?: () => number } = {}): Authenticator {
  const cacheMs = options.cacheMs ?? DEFAULT_AUTH_CACHE_MS;
  const now = options.now ?? Date.now;
  const cache = new Map<string, { key: ApiKey | null; until: number }>();
  return {
    async authenticate(header) {
      const match = /^Bearer\s+(\S{16,512})\s*$/i.exec(header ?? '');
      if (!match?.[1]) throw new HttpError('unauthorized', 'send an API key as "Authorization: Bearer <key>"');
      const secret = match[1];
      const at = now();
      let hit = cache.get(secret);
      if (!hit || hit.until <= at) {
        hit = { key: await findApiKey(store, secret), until: at + cacheMs };
        if (cache.size > 1000) cache.clear();
        cache.set(secret, hit);
      }
      if (!hit.key) throw new HttpError('unauthorized', 'the API key is not valid');
      return { tenant: hit.key.tenant, keyId: hit.key.id, scope: hit.key.scope, workflowIds: hit.key.workflowIds };
    },
  };
}

export function requireAdmin(principal: Principal): void {
  if (principal.scope !== 'admin') throw new HttpError('forbidden', 'this route needs an admin key');
}

/** An execute key may use only its workflows; others answer as if the workflow did not exist. */
export function requireWorkflow(principal: Principal, workflowId: string): void {
  if (principal.scope === 'admin') return;
  if (!principal.workflowIds.includes(workflowId)) throw new HttpError('not_found', 'workflow not found');
}
