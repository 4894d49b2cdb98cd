/** A local HTTP endpoint for Invoke: records every request, answers with a small JSON body. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TargetServer {
  url: string;
  requests: { at: number; path: string; body: string }[];
  close(): Promise<void>;
}

/** `onRequest` is told of each request as it is recorded (tests that keep an ordered log). */
export async function startTarget(onRequest?: (request: TargetServer['requests'][number]) => void): Promise<TargetServer> {
  const requests: TargetServer['requests'] = [];
  const server: Server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    const request = { at: Date.now(), path: req.url ?? '', body };
    requests.push(request);
    onRequest?.(request);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, n: requests.length }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
