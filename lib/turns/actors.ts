/**
 * Who acted on a turn, as its record names it: the audit trail of a run. A turn started over
 * HTTP names the key and, on a public key, what opened the run to it (the run's token or an
 * end-user token); turns nobody sent name the mechanism (a timer, a queue message).
 */
export const ACTOR_KINDS = ['admin_key', 'execute_key', 'run_token', 'end_user', 'form_link', 'webhook', 'timer', 'queue'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

export interface Actor {
  kind: ActorKind;
  /**
   * admin_key / execute_key / run_token: the API key's id; end_user: the user id the token
   * asserts (its key in `key_id`); timer / queue: the run id; form_link / webhook: the link's
   * or hook's id.
   */
  id: string;
  /** end_user: the execute key that presented the token. */
  key_id?: string;
}

/**
 * The identity quotas count against below the tenant: the end user when one is asserted, else
 * the execute key; none for admin keys and for turns nobody sent (they count on the tenant only).
 */
export function quotaSubject(actor: Actor | undefined): string | null {
  if (!actor) return null;
  if (actor.kind === 'end_user') return `user:${actor.id}`;
  if (actor.kind === 'execute_key' || actor.kind === 'run_token') return `key:${actor.id}`;
  return null;
}
