/**
 * The client's address, for the run-start limit per address. It comes from what the hosting
 * saw, never from a header a client can write: on Lambda, the event's `requestContext` (API
 * Gateway HTTP API and Function URLs: `http.sourceIp`; REST APIs: `identity.sourceIp`); under
 * npm start, the socket (lib/local/app.ts). X-Forwarded-For is read only when proxies that
 * append to it are configured (EASEL_QUOTA_TRUSTED_PROXY_HOPS).
 *
 * @example
 *   createApp({ ...deps, clientAddress: forwardedFor(lambdaSourceIp, 1) }); // behind CloudFront
 */
import type { Context } from 'hono';

export type ClientAddress = (c: Context) => string | undefined;

/** The source address of a Lambda event (API Gateway v1/v2, Function URL); undefined elsewhere. */
export const lambdaSourceIp: ClientAddress = (c) => {
  const context = (c.env as { requestContext?: { http?: { sourceIp?: unknown }; identity?: { sourceIp?: unknown } } } | undefined)?.requestContext;
  const ip = context?.http?.sourceIp ?? context?.identity?.sourceIp;
  return typeof ip === 'string' && ip !== '' ? ip : undefined;
};

/**
 * With `hops` trusted proxies in front, each appending the address it saw to X-Forwarded-For,
 * the client is the entry `hops` from the right; a header with fewer entries (or none) was not
 * written by them, and the address `direct` saw is used. 0 hops: `direct` alone.
 */
export function forwardedFor(direct: ClientAddress, hops: number): ClientAddress {
  if (hops <= 0) return direct;
  return (c) => {
    const entries = (c.req.header('x-forwarded-for') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    return entries.length >= hops ? entries[entries.length - hops] : direct(c);
  };
}
