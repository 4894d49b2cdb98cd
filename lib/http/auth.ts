/**
 * Who is asking. A bearer API key is looked up by its hash (results cached per container for
 * `cacheMs`, so a revocation takes effect within that time). An execute key may also present
 * what opens runs to it (lib/http/access.ts says what each may do):
 *   - a run token (`Easel-Run-Token`), returned when it started that run;
 *   - an end-user token (`Easel-End-User-Token`, or appended to the key in Authorization as
 *     `Bearer <key>.<token>` for clients that send nothing else): an HS256 JWT the tenant's site
 *     signs with its embed secret.
 * Admin keys act on everything of their tenant and ignore both.
 */
import type { EmbedSecrets } from '../secrets/embed-secrets';
import { EndUserTokenError } from '../secrets/embed-secrets';
import type { SignedTokens } from '../secrets/signed-tokens';
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

export interface Credentials {
  /** The Authorization header. */
  authorization: string | undefined;
  /** Easel-Run-Token. */
  runToken?: string | undefined;
  /** Easel-End-User-Token. */
  endUserToken?: string | undefined;
}

export interface Authenticator {
  authenticate(credentials: Credentials): Promise<Principal>;
}

export const DEFAULT_AUTH_CACHE_MS = 30_000;
export const RUN_TOKEN_HEADER = 'easel-run-token';
export const END_USER_TOKEN_HEADER = 'easel-end-user-token';

/** `<key>.<JWT>`: a JWT's header part always starts `eyJ` (`{"`), which no generated key contains. */
const KEY_WITH_TOKEN = /^(\S{16,512}?)\.(eyJ[\w-]*\.[\w-]*\.[\w-]+)$/;

export interface AuthenticatorOptions {
  cacheMs?: number;
  now?: () => number;
  /** Run tokens (lib/secrets/signed-tokens.ts); absent: run tokens are refused. */
  runTokens?: SignedTokens;
  /** Embed secrets; absent: end-user tokens are refused. */
  embedSecrets?: EmbedSecrets;
}

export function createAuthenticator(store: StoreContext, options: AuthenticatorOptions = {}): Authenticator {
  const cacheMs = options.cacheMs ?? DEFAULT_AUTH_CACHE_MS;
  const now = options.now ?? Date.now;
  const cache = new Map<string, { key: ApiKey | null; until: number }>();
  const lookUp = async (secret: string) => {
    const at = now();
    let hit = cache.get(secret);
    if (!hit || hit.until <= at) {
      hit = { key: await findApiKey(store, secret), until: at + cacheMs };
      if (cache.size > 1000) cache.clear();
      cache.set(secret, hit);
    }
    return hit.key;
  };
  return {
    async authenticate({ authorization, runToken, endUserToken }) {
      const match = /^Bearer\s+(\S{16,4096})\s*$/i.exec(authorization ?? '');
      if (!match?.[1]) throw new HttpError('unauthorized', 'send an API key as "Authorization: Bearer <key>"');
      const sent = match[1];
      const combined = KEY_WITH_TOKEN.exec(sent);
      let key: ApiKey | null = null;
      if (combined?.[1] && combined[2]) {
        if (endUserToken) throw new HttpError('unauthorized', 'send the end-user token once: in Authorization or in Easel-End-User-Token, not both');
        key = await lookUp(combined[1]);
        if (key) endUserToken = combined[2];
      }
      // a key of its own that merely looks like `<key>.<JWT>` (any string may be npm start's key)
      if (!key && sent.length <= 512) key = await lookUp(sent);
      if (!key) throw new HttpError('unauthorized', 'the API key is not valid');
      const principal: Principal = { tenant: key.tenant, keyId: key.id, scope: key.scope, workflowIds: key.workflowIds };
      if (key.scope === 'admin') return principal;
      if (runToken !== undefined && runToken !== '') {
        const runId = options.runTokens ? await options.runTokens.verify(key.tenant, runToken) : null;
        if (!runId) throw new HttpError('unauthorized', 'Easel-Run-Token is not a valid run token of this tenant', { field: 'Easel-Run-Token' });
        principal.runId = runId;
      }
      if (endUserToken !== undefined && endUserToken !== '') {
        if (!options.embedSecrets) throw new HttpError('unauthorized', 'end-user tokens are not configured here', { field: 'Easel-End-User-Token' });
        try {
          const user = await options.embedSecrets.verify(key.tenant, endUserToken);
          principal.endUser = { id: user.id, workflowIds: user.workflowIds.filter((w) => key.workflowIds.includes(w)) };
        } catch (error) {
          if (error instanceof EndUserTokenError) throw new HttpError('unauthorized', error.message, { field: 'Easel-End-User-Token' });
          throw error;
        }
      }
      return principal;
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
  // an end-user token opens only the workflows it names
  if (principal.endUser && !principal.endUser.workflowIds.includes(workflowId)) throw new HttpError('not_found', 'workflow not found');
}
