/**
 * Webhooks: a JSON POST to a tenant's URL, through the SSRF guard, signed so the receiver can
 * tell it came from Easel and was not replayed:
 *
 *   Easel-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
 *
 * Verify by recomputing the HMAC over the timestamp, a dot and the raw body with the tenant's
 * webhook secret, comparing in constant time, and refusing timestamps older than a few minutes.
 * Failures (network, 5xx, 429) are retried with exponential backoff; 4xx answers are final.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { OutboundError, outboundRequest } from './request';
import type { SsrfGuard } from './ssrf';

export const SIGNATURE_HEADER = 'easel-signature';

export function signature(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** For receivers (and tests): true when `header` signs `body` with `secret` within `toleranceSeconds`. */
export function verifySignature(secret: string, header: string, body: string, nowSeconds = Math.floor(Date.now() / 1000), toleranceSeconds = 300): boolean {
  const parts = Object.fromEntries(header.split(',').map((p) => p.split('=') as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds || !parts.v1) return false;
  const expected = Buffer.from(signature(secret, t, body).split('v1=')[1] as string, 'hex');
  const given = Buffer.from(parts.v1, 'hex');
  return expected.length === given.length && timingSafeEqual(expected, given);
}

export interface WebhookResult {
  delivered: boolean;
  attempts: number;
  status?: number;
  error?: string;
}

export async function sendWebhook(options: {
  url: string;
  event: string;
  payload: unknown;
  secret: string;
  guard: SsrfGuard;
  attempts?: number;
  baseDelayMs?: number;
  timeoutMs?: number;
}): Promise<WebhookResult> {
  const body = JSON.stringify({ event: options.event, data: options.payload });
  const attempts = options.attempts ?? 4;
  let last: WebhookResult = { delivered: false, attempts: 0 };
  for (let n = 1; n <= attempts; n++) {
    const timestamp = Math.floor(Date.now() / 1000);
    try {
      const res = await outboundRequest({
        url: options.url,
        method: 'POST',
        headers: { 'content-type': 'application/json', [SIGNATURE_HEADER]: signature(options.secret, timestamp, body), 'easel-event': options.event },
        body,
        timeoutMs: options.timeoutMs ?? 10_000,
        maxRedirects: 0,
        guard: options.guard,
      });
      last = { delivered: res.status < 300, attempts: n, status: res.status };
      if (res.status < 300 || (res.status < 500 && res.status !== 429)) return last;
    } catch (error) {
      last = { delivered: false, attempts: n, error: error instanceof Error ? error.message : 'failed' };
      if (!(error instanceof OutboundError) || !error.transient) return last;
    }
    if (n < attempts) await new Promise((resolve) => setTimeout(resolve, (options.baseDelayMs ?? 500) * 2 ** (n - 1)));
  }
  return last;
}
