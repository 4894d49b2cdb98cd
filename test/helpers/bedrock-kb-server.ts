/**
 * A local stand-in for the Bedrock Agent Runtime's `Retrieve` (Knowledge Bases), speaking the
 * REST-JSON protocol the real AWS SDK uses: `POST /knowledgebases/{knowledgeBaseId}/retrieve`
 * with a JSON body, answered `{"retrievalResults": [...]}`, or an error as the service sends
 * it: its HTTP status, `x-amzn-errortype: <Name>:<namespace>` and `{"message": ...}`.
 *
 * HTTP/2 over cleartext on 127.0.0.1 (node:http2): the SDK's request handler for this client is
 * `NodeHttp2Handler`, which speaks HTTP/2 with prior knowledge to an `http://` endpoint.
 *
 * Checked as the service does, before anything is searched: a SigV4 `Authorization` header
 * scoped to the `bedrock` service (its signature is not verified), the id's pattern, the
 * query text, `numberOfResults` (1..100), the filter's operators. The search scores each
 * document of the knowledge base by the share of the query's words it contains and answers the
 * best `numberOfResults`, zero scores included, as a vector store does. Scriptable per request
 * (a queue, then a fallback): an error, a stall, a raw body.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

export interface KbDocument {
  text: string;
  location: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  /** A structured store's row instead of text. */
  row?: { columnName: string; columnValue: string; type: string }[];
}

export type ScriptedResponse =
  | { kind: 'error'; status: number; errorType: string; message: string; headers?: Record<string, string> }
  /** Never answers (not even headers). */
  | { kind: 'stall' }
  /** HTTP 200 with this body as it is. */
  | { kind: 'raw'; body: string; contentType?: string };

export interface RecordedRequest {
  method: string;
  path: string;
  knowledgeBaseId: string;
  headers: Record<string, string>;
  /** The region of the SigV4 credential scope. */
  region: string;
  body: any;
}

const PATH = /^\/knowledgebases\/([^/]*)\/retrieve$/;
const SCOPE = /^AWS4-HMAC-SHA256 Credential=[^/]+\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=[^,]+, Signature=[0-9a-f]{64}$/;
const FILTER_OPERATORS = ['equals', 'notEquals', 'in', 'notIn', 'startsWith', 'andAll', 'orAll'];

export class BedrockKbServer {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedResponse[] = [];
  private fallback: ScriptedResponse | undefined;
  private readonly arrivals = new Set<{ count: number; resolve: () => void }>();
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly server: http2.Http2Server;
  private port = 0;

  private constructor(private readonly knowledgeBases: Record<string, KbDocument[]>) {
    this.server = http2.createServer();
    this.server.on('session', (session) => {
      this.sessions.add(session);
      session.on('close', () => this.sessions.delete(session));
      session.on('error', () => {});
    });
    this.server.on('stream', (stream, headers) => this.handle(stream, headers));
  }

  static async start(knowledgeBases: Record<string, KbDocument[]>): Promise<BedrockKbServer> {
    const server = new BedrockKbServer(knowledgeBases);
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.server.listen(0, '127.0.0.1', () => resolve());
    });
    server.port = (server.server.address() as AddressInfo).port;
    return server;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  enqueue(...responses: ScriptedResponse[]): this {
    this.queue.push(...responses);
    return this;
  }

  always(response: ScriptedResponse | undefined): this {
    this.fallback = response;
    return this;
  }

  /** Resolves once `count` requests have arrived in all. */
  arrived(count: number): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.arrivals.add({ count, resolve }));
  }

  reset(): void {
    this.queue.length = 0;
    this.fallback = undefined;
    this.requests.length = 0;
  }

  async close(): Promise<void> {
    for (const session of this.sessions) session.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {});
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = undefined;
      }
      const flat: Record<string, string> = {};
      for (const [key, value] of Object.entries(headers)) if (value !== undefined) flat[key] = Array.isArray(value) ? value.join(', ') : String(value);
      const path = String(headers[':path'] ?? '');
      const match = PATH.exec(path.split('?')[0] ?? '');
      const scope = SCOPE.exec(flat.authorization ?? '');
      this.requests.push({
        method: String(headers[':method'] ?? ''),
        path,
        knowledgeBaseId: match ? decodeURIComponent(match[1]!) : '',
        headers: flat,
        region: scope?.[1] ?? '',
        body,
      });
      for (const waiter of this.arrivals) {
        if (this.requests.length < waiter.count) continue;
        this.arrivals.delete(waiter);
        waiter.resolve();
      }

      const script = this.queue.shift() ?? this.fallback;
      if (script?.kind === 'stall') return;
      if (script?.kind === 'error') return this.sendError(stream, script.status, script.errorType, script.message, script.headers);
      if (script?.kind === 'raw') return this.send(stream, 200, script.body, script.contentType);

      if (!flat.authorization) return this.sendError(stream, 403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
      if (!scope || !flat['x-amz-date']) return this.sendError(stream, 403, 'IncompleteSignatureException', 'Authorization header requires Credential, SignedHeaders and Signature.');
      if (scope[2] !== 'bedrock') return this.sendError(stream, 403, 'InvalidSignatureException', "Credential should be scoped to correct service: 'bedrock'.");
      if (headers[':method'] !== 'POST' || !match) return this.sendError(stream, 404, 'UnknownOperationException', 'UnknownError');
      const problem = validate(decodeURIComponent(match[1]!), body);
      if (problem) return this.sendError(stream, 400, 'ValidationException', problem);
      const id = decodeURIComponent(match[1]!);
      const documents = this.knowledgeBases[id];
      if (!documents) return this.sendError(stream, 404, 'ResourceNotFoundException', `Knowledge base with id ${id} does not exist`);
      this.send(stream, 200, JSON.stringify(search(documents, body as RetrieveBody)));
    });
  }

  private send(stream: http2.ServerHttp2Stream, status: number, body: string, contentType = 'application/json'): void {
    if (stream.destroyed) return;
    stream.respond({ ':status': status, 'content-type': contentType, 'x-amzn-requestid': `req-${this.requests.length}` });
    stream.end(body);
  }

  private sendError(stream: http2.ServerHttp2Stream, status: number, errorType: string, message: string, headers: Record<string, string> = {}): void {
    if (stream.destroyed) return;
    stream.respond({
      ':status': status,
      'content-type': 'application/json',
      'x-amzn-requestid': `req-${this.requests.length}`,
      'x-amzn-errortype': `${errorType}:http://internal.amazon.com/coral/com.amazon.bedrock.agent.runtime/`,
      ...headers,
    });
    stream.end(JSON.stringify({ message }));
  }
}

interface RetrieveBody {
  retrievalQuery: { text: string };
  retrievalConfiguration?: { vectorSearchConfiguration?: { numberOfResults?: number; filter?: Filter } };
}

type Filter = Record<string, unknown>;

/** The service's "1 validation error detected" message, or undefined. */
function validate(id: string, body: unknown): string | undefined {
  const constraint = (value: unknown, field: string, rule: string) => `1 validation error detected: Value '${String(value)}' at '${field}' failed to satisfy constraint: ${rule}`;
  if (!/^[0-9a-zA-Z]{1,10}$/.test(id)) return constraint(id, 'knowledgeBaseId', 'Member must satisfy regular expression pattern: [0-9a-zA-Z]+');
  const b = body as Partial<RetrieveBody> | undefined;
  if (typeof b?.retrievalQuery?.text !== 'string' || b.retrievalQuery.text.length === 0) {
    return constraint(b?.retrievalQuery?.text, 'retrievalQuery.text', 'Member must have length greater than or equal to 1');
  }
  const n = b.retrievalConfiguration?.vectorSearchConfiguration?.numberOfResults;
  if (n !== undefined && (!Number.isInteger(n) || n < 1 || n > 100)) {
    return constraint(n, 'retrievalConfiguration.vectorSearchConfiguration.numberOfResults', 'Member must have value less than or equal to 100');
  }
  const filter = b.retrievalConfiguration?.vectorSearchConfiguration?.filter;
  if (filter !== undefined && !validFilter(filter)) return 'The filter is not a valid RetrievalFilter: exactly one operator is required.';
  return undefined;
}

function validFilter(filter: Filter): boolean {
  const keys = Object.keys(filter);
  if (keys.length !== 1 || !FILTER_OPERATORS.includes(keys[0]!)) return false;
  const value = filter[keys[0]!];
  if (keys[0] === 'andAll' || keys[0] === 'orAll') return Array.isArray(value) && value.length >= 2 && value.every((f) => validFilter(f as Filter));
  return typeof value === 'object' && value !== null && typeof (value as { key?: unknown }).key === 'string';
}

function matches(filter: Filter, metadata: Record<string, unknown>): boolean {
  const [operator, raw] = Object.entries(filter)[0]!;
  if (operator === 'andAll') return (raw as Filter[]).every((f) => matches(f, metadata));
  if (operator === 'orAll') return (raw as Filter[]).some((f) => matches(f, metadata));
  const { key, value } = raw as { key: string; value: unknown };
  const actual = metadata[key];
  switch (operator) {
    case 'equals':
      return actual === value;
    case 'notEquals':
      return actual !== value;
    case 'in':
      return Array.isArray(value) && value.includes(actual);
    case 'notIn':
      return Array.isArray(value) && !value.includes(actual);
    case 'startsWith':
      return typeof actual === 'string' && typeof value === 'string' && actual.startsWith(value);
  }
  return false;
}

const words = (text: string) => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];

function search(documents: readonly KbDocument[], body: RetrieveBody) {
  const terms = words(body.retrievalQuery.text);
  const config = body.retrievalConfiguration?.vectorSearchConfiguration;
  const n = config?.numberOfResults ?? 5;
  const scored = documents
    .filter((d) => !config?.filter || matches(config.filter, d.metadata ?? {}))
    .map((d) => {
      const present = new Set(words(d.text || (d.row ?? []).map((c) => c.columnValue).join(' ')));
      return { d, score: terms.length === 0 ? 0 : terms.filter((t) => present.has(t)).length / terms.length };
    })
    .sort((a, b) => b.score - a.score)
    .slice(0, n);
  return {
    retrievalResults: scored.map(({ d, score }) => ({
      content: d.row ? { type: 'ROW', row: d.row } : { type: 'TEXT', text: d.text },
      location: d.location,
      ...(d.metadata ? { metadata: d.metadata } : {}),
      score,
    })),
  };
}
