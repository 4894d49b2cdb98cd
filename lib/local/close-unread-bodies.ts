/**
 * For the Node HTTP server only (`npm start`, tests): a request answered without reading its body
 * (a 401, 404 or 413 before the handler parses anything, a GET that carries a body) leaves the
 * body on the socket. Closing a socket with unread bytes resets it, and the client may lose the
 * answer itself; @hono/node-server drains non-GET bodies for a moment, then destroys the socket
 * without telling the client, whose next request on that keep-alive connection fails.
 *
 * So: the unread rest is read and dropped (up to a bound) before the answer goes out, and the
 * answer says `Connection: close`. Lambda is unaffected: API Gateway and Function URLs own the
 * connection.
 */
import type { IncomingMessage } from 'node:http';

type Fetch = (request: Request, ...rest: never[]) => Response | Promise<Response>;

/** How much of an unread body is read and dropped, and for how long, before answering anyway. */
const DRAIN_MAX_BYTES = 1024 * 1024;
const DRAIN_MAX_MS = 1000;

export function closeUnreadBodies<F extends Fetch>(fetch: F): F {
  return (async (request: Request, ...rest: never[]) => {
    const response = await fetch(request, ...rest);
    const hasBody = request.headers.has('transfer-encoding') || Number(request.headers.get('content-length') ?? 0) > 0;
    if (!hasBody || request.bodyUsed) return response;
    // drained from the Node stream itself: a GET's body never reaches the Request (fetch has none)
    const incoming = (rest[0] as { incoming?: IncomingMessage } | undefined)?.incoming;
    if (incoming) await drainIncoming(incoming);
    const headers = new Headers(response.headers);
    headers.set('connection', 'close');
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }) as F;
}

function drainIncoming(incoming: IncomingMessage): Promise<void> {
  if (incoming.readableEnded || incoming.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let read = 0;
    const done = () => {
      clearTimeout(timer);
      incoming.off('data', onData).off('end', done).off('error', done).off('close', done);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > DRAIN_MAX_BYTES) done();
    };
    const timer = setTimeout(done, DRAIN_MAX_MS);
    incoming.on('data', onData).once('end', done).once('error', done).once('close', done);
    incoming.resume();
  });
}
