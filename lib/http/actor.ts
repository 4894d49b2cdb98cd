/**
 * Who acts on a turn, from the request's principal (lib/turns/actors.ts): the end user a token
 * asserts, the run a run token opens, or the key itself. Quotas count against it.
 */
import type { Actor } from '../turns/actors';
import type { Principal } from './auth';

export function actorOf(principal: Principal): Actor {
  if (principal.endUser) return { kind: 'end_user', id: principal.endUser.id, key_id: principal.keyId };
  if (principal.runId) return { kind: 'run_token', id: principal.keyId };
  return { kind: principal.scope === 'admin' ? 'admin_key' : 'execute_key', id: principal.keyId };
}
