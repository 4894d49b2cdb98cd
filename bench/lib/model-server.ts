/**
 * A model for the bench's turns that call one: a server on 127.0.0.1 speaking the OpenAI
 * chat-completions protocol (`POST /v1/chat/completions`), answering every request at once with
 * one whole JSON completion of a fixed short text. Point EASEL_LLM_BASE_URL at `url`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ModelServer {
  /** The base URL as EASEL_LLM_BASE_URL takes it (`.../v1`). */
  url: string;
  /** Completions answered so far. */
  calls(): number;
  close(): Promise<void>;
}

const ANSWER = 'A short answer from the bench model.';

export async function startModelServer(): Promise<ModelServer> {
  let calls = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
        return;
      }
      calls++;
      let model = 'bench';
      try {
        model = String((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model?: string }).model ?? model);
      } catch {
        // the answer does not depend on the request
      }
      const body = JSON.stringify({
        id: `chatcmpl-${calls}`,
        object: 'chat.completion',
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 24, completion_tokens: 8, total_tokens: 32 },
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    calls: () => calls,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
