/**
 * A local server speaking OpenAI's `POST /v1/embeddings`, with deterministic vectors that know a
 * few synonyms: words of one concept ("car", "automobile", "vehicle") share a dimension, so a
 * question can be near a chunk it shares no word with — what full-text search alone misses.
 * Every other word lands on a dimension of its own by hash. Records every request.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export const EMBEDDING_DIMENSIONS = 32;

const CONCEPTS: Record<string, number> = {
  car: 0, cars: 0, automobile: 0, automobiles: 0, vehicle: 0, vehicles: 0,
  money: 1, refund: 1, reimbursement: 1, repayment: 1,
};

export function fakeEmbedding(text: string, dimensions = EMBEDDING_DIMENSIONS): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/\p{L}+/gu) ?? []) {
    const concept = CONCEPTS[word];
    if (concept !== undefined) {
      vector[concept]! += 1;
      continue;
    }
    let h = 0;
    for (const ch of word) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    vector[2 + (h % (dimensions - 2))]! += 0.2;
  }
  return vector;
}

export interface EmbeddingsServer {
  /** The base URL, as EASEL_LLM_BASE_URL takes it (`.../v1`). */
  baseUrl: string;
  requests: { model: string; input: string[]; authorization?: string }[];
  /** Answers the next `n` requests with this status instead. */
  failNext(n: number, status: number): void;
  close(): Promise<void>;
}

export async function startEmbeddingsServer(dimensions = EMBEDDING_DIMENSIONS): Promise<EmbeddingsServer> {
  const requests: EmbeddingsServer['requests'] = [];
  let failures = 0;
  let failStatus = 500;
  const server: Server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    if (req.method !== 'POST' || req.url !== '/v1/embeddings') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
      return;
    }
    const parsed = JSON.parse(body) as { model: string; input: string[] | string };
    const input = Array.isArray(parsed.input) ? parsed.input : [parsed.input];
    requests.push({ model: parsed.model, input, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
    if (failures > 0) {
      failures--;
      res.writeHead(failStatus, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'the model is not available' } }));
      return;
    }
    const data = input.map((text, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(text, dimensions) }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model: parsed.model, usage: { prompt_tokens: 0, total_tokens: 0 } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    failNext(n, status) {
      failures = n;
      failStatus = status;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
