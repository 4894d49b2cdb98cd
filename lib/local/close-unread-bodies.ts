/**
 * For the Node HTTP server only (`npm start`, tests): a request answered without reading its body
 * (a 401, 404 or 413 before the handler parses anything) leaves the body on the socket.
 * @hono/node-server drains it for a moment and then destroys the socket without telling the
 * client, whose next request on that keep-alive connection fails. `Connection: close` tells it.
 * Lambda is unaffected: API Gateway and Function URLs own the connection.
 */
type Fetch = (request: Request, ...rest: never[]) => Response | Promise<Response>;

export function closeUnreadBodies<F extends Fetch>(fetch: F): F {
  return (async (request: Request, ...rest: never[]) => {
    const response = await fetch(request, ...rest);
    const hasBody = request.headers.has('transfer-encoding') || Number(request.headers.get('content-length') ?? 0) > 0;
    if (!hasBody || request.bodyUsed) return response;
    const headers = new Headers(response.headers);
    headers.set('connection', 'close');
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }) as F;
}
