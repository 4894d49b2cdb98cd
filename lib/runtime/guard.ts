/** The SSRF guard for URLs tenants supply (Invoke, webhooks, callbacks), with the operator's allow-list. */
import type { EaselConfig } from '../config';
import { SsrfGuard } from '../outbound/ssrf';

export function buildGuard(config: Pick<EaselConfig, 'ssrfAllow'>): SsrfGuard {
  return new SsrfGuard({ allow: config.ssrfAllow });
}
