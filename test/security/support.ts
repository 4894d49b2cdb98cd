/**
 * Shared by the security suites: a keep-alive HTTP client that sends paths and headers exactly
 * as given (no URL normalisation, unlike fetch), the list of every route of the app, and the
 * checks of the documented error shapes (native `{code, error}`, RAGFlow's `{code, message}`).
 */
import http from 'node:http';
import { isErrorCode } from '../../lib/errors';
import { STATUS_BY_CODE } from '../../lib/http/errors';

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The request went over a socket an earlier request had used (keep-alive). */
  reused: boolean;
  json: any;
}

export interface RawRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/** One node:http Agent with keepAlive: every request of a suite shares its sockets. */
export class KeepAliveClient {
  readonly agent: http.Agent;
  requests = 0;
  newConnections = 0;
  private readonly host: string;
  private readonly port: number;

  constructor(baseUrl: string, maxSockets = 8) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.agent = new http.Agent({ keepAlive: true, maxSockets });
  }

  /** The request each socket carried last: a connection closed under a later request names it. */
  private readonly lastOnSocket = new WeakMap<object, string>();

  send(req: RawRequest, timeoutMs = 20_000): Promise<RawResponse> {
    this.requests++;
    const headers: Record<string, string | number> = { ...req.headers };
    if (req.body !== undefined) headers['content-length'] = Buffer.byteLength(req.body);
    return new Promise((resolve, reject) => {
      // `Connection: close` alone does not keep Node's agent from pooling the socket again
      const own = /^close$/i.test(req.headers?.connection ?? '');
      const r = http.request({ agent: own ? false : this.agent, host: this.host, port: this.port, method: req.method, path: req.path, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, reused: r.reusedSocket, json });
        });
      });
      const timer = setTimeout(() => r.destroy(new Error(`no complete answer within ${timeoutMs} ms`)), timeoutMs);
      let previous: string | undefined;
      r.on('socket', (socket) => {
        if (!r.reusedSocket) this.newConnections++;
        previous = this.lastOnSocket.get(socket);
        this.lastOnSocket.set(socket, `${req.method} ${req.path.slice(0, 150)} ${JSON.stringify(req.headers ?? {}).slice(0, 300)} body ${String(req.body ?? '').slice(0, 200)}`);
      });
      r.on('error', (error) => {
        clearTimeout(timer);
        if (previous) error.message += ` [reused socket; its previous request: ${previous}]`;
        reject(error);
      });
      if (req.body !== undefined) r.write(req.body);
      r.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

export type Api = 'public' | 'native' | 'ragflow';

export interface Route {
  method: string;
  /** Placeholders: {wf} {run} {n} {file} {key} {agent} {sid} {sname} (a tenant secret's name) {emb} (an embed secret's id) {user} (an end user's id) {cid} (a component's id) {mid} (a message id) {hook} (a webhook's id) {kb} (a knowledge base's id, RAGFlow's dataset id) {doc} (a document's id) {mcp} (an MCP server's id) {replay} (a replay's id) */
  path: string;
  api: Api;
  /** Answers with the admin scope only. */
  admin?: boolean;
}

/** Every route of the app: the route tables of docs/native-api.md, docs/ragflow-api.md and docs/mcp.md, the playground page and its assets. */
export const ROUTES: readonly Route[] = [
  { method: 'GET', path: '/health', api: 'public' },
  { method: 'GET', path: '/openapi.json', api: 'public' },
  { method: 'GET', path: '/playground', api: 'public' },
  { method: 'GET', path: '/', api: 'public' },
  { method: 'GET', path: '/favicon.ico', api: 'public' },
  { method: 'GET', path: '/playground/', api: 'public' },
  { method: 'GET', path: '/playground/{wf}', api: 'public' },
  { method: 'GET', path: '/playground/assets/app.js', api: 'public' },
  { method: 'GET', path: '/playground/assets/app.css', api: 'public' },
  { method: 'GET', path: '/playground/assets/form.js', api: 'public' },
  { method: 'GET', path: '/playground/assets/fields.js', api: 'public' },
  ...['api', 'form-view', 'live', 'markdown', 'run-list', 'transcript'].map((name) => ({ method: 'GET', path: `/playground/assets/${name}.js`, api: 'public' }) as const),
  { method: 'GET', path: '/playground/form', api: 'public' },
  // no API key: the form link's token (Easel-Form-Token) is the capability (form-links.test.ts)
  { method: 'GET', path: '/workflows/v1/form-link', api: 'public' },
  { method: 'POST', path: '/workflows/v1/form-link', api: 'public' },
  // no API key: a delivery authenticates as its Begin says (end-users.test.ts, "webhook deliveries")
  { method: 'POST', path: '/workflows/v1/webhooks/{hook}', api: 'public' },
  { method: 'POST', path: '/api/v1/agents/{agent}/webhook', api: 'public' },
  { method: 'POST', path: '/workflows/v1/workflows', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/workflows', api: 'native' },
  { method: 'GET', path: '/workflows/v1/workflows/{wf}', api: 'native' },
  { method: 'PATCH', path: '/workflows/v1/workflows/{wf}', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/workflows/{wf}', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/workflows/{wf}/versions', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/workflows/{wf}/versions', api: 'native' },
  { method: 'POST', path: '/workflows/v1/workflows/{wf}/versions/{n}/activate', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/workflows/{wf}/versions/{n}/migrate', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/workflows/{wf}/execute', api: 'native' },
  { method: 'GET', path: '/workflows/v1/workflow-runs', api: 'native' },
  { method: 'GET', path: '/workflows/v1/workflow-runs/{run}', api: 'native' },
  { method: 'DELETE', path: '/workflows/v1/workflow-runs/{run}', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/workflows/{wf}/runs/{run}/pump-companions', api: 'native' },
  { method: 'GET', path: '/workflows/v1/workflow-runs/{run}/turns', api: 'native' },
  { method: 'POST', path: '/workflows/v1/workflow-runs/{run}/form-links', api: 'native' },
  { method: 'POST', path: '/workflows/v1/workflow-runs/{run}/fork', api: 'native' },
  { method: 'POST', path: '/workflows/v1/workflows/{wf}/replays', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/workflows/{wf}/replays/{replay}', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/workflows/{wf}/replays/{replay}/results', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/workflow-runs/{run}/turns/{n}', api: 'native' },
  { method: 'GET', path: '/workflows/v1/workflow-runs/{run}/turns/{n}/events', api: 'native' },
  { method: 'POST', path: '/workflows/v1/files', api: 'native' },
  { method: 'GET', path: '/workflows/v1/files/{file}', api: 'native' },
  { method: 'DELETE', path: '/workflows/v1/files/{file}', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/keys', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/keys', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/keys/{key}', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/webhook-secret', api: 'native', admin: true },
  { method: 'PUT', path: '/workflows/v1/secrets/{sname}', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/secrets', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/secrets/{sname}', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/embed-secrets', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/embed-secrets', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/embed-secrets/{emb}', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/end-users/{user}', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/knowledge-bases', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/knowledge-bases', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/knowledge-bases/{kb}', api: 'native', admin: true },
  { method: 'PATCH', path: '/workflows/v1/knowledge-bases/{kb}', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/knowledge-bases/{kb}', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/knowledge-bases/{kb}/documents', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/knowledge-bases/{kb}/documents', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/knowledge-bases/{kb}/documents/parse', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/knowledge-bases/{kb}/documents/{doc}', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/knowledge-bases/{kb}/documents/{doc}', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/knowledge-bases/{kb}/documents/{doc}/chunks', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/knowledge-bases/{kb}/search', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/mcp-servers', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/mcp-servers', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/mcp-servers/import', api: 'native', admin: true },
  { method: 'GET', path: '/workflows/v1/mcp-servers/{mcp}', api: 'native', admin: true },
  { method: 'PATCH', path: '/workflows/v1/mcp-servers/{mcp}', api: 'native', admin: true },
  { method: 'DELETE', path: '/workflows/v1/mcp-servers/{mcp}', api: 'native', admin: true },
  { method: 'POST', path: '/workflows/v1/mcp-servers/{mcp}/tools', api: 'native', admin: true },
  { method: 'GET', path: '/api/v1/agents', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/agents', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/agents/templates', api: 'ragflow' },
  { method: 'GET', path: '/api/v1/agents/tags', api: 'ragflow' },
  { method: 'PUT', path: '/api/v1/agents/{agent}/tags', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/agents/{agent}', api: 'ragflow' },
  { method: 'PUT', path: '/api/v1/agents/{agent}', api: 'ragflow', admin: true },
  { method: 'DELETE', path: '/api/v1/agents/{agent}', api: 'ragflow', admin: true },
  { method: 'POST', path: '/api/v1/agents/{agent}/sessions', api: 'ragflow' },
  { method: 'GET', path: '/api/v1/agents/{agent}/sessions', api: 'ragflow' },
  { method: 'GET', path: '/api/v1/agents/{agent}/sessions/{sid}', api: 'ragflow' },
  { method: 'DELETE', path: '/api/v1/agents/{agent}/sessions', api: 'ragflow', admin: true },
  { method: 'DELETE', path: '/api/v1/agents/{agent}/sessions/{sid}', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/agents/{agent}/versions', api: 'ragflow' },
  { method: 'GET', path: '/api/v1/agents/{agent}/versions/{n}', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/agents/{agent}/reset', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/agents/{agent}/components/{cid}/input-form', api: 'ragflow' },
  { method: 'GET', path: '/api/v1/agents/{agent}/logs/{mid}', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/agents/chat/completions', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/agents/{agent}/completions', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/agents_openai/{agent}/chat/completions', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/agents/{agent}/upload', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/file/upload_info', api: 'ragflow' },
  { method: 'POST', path: '/api/v1/datasets', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/datasets', api: 'ragflow', admin: true },
  { method: 'DELETE', path: '/api/v1/datasets', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/datasets/{kb}', api: 'ragflow', admin: true },
  { method: 'PUT', path: '/api/v1/datasets/{kb}', api: 'ragflow', admin: true },
  { method: 'POST', path: '/api/v1/datasets/{kb}/documents', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/datasets/{kb}/documents', api: 'ragflow', admin: true },
  { method: 'DELETE', path: '/api/v1/datasets/{kb}/documents', api: 'ragflow', admin: true },
  { method: 'POST', path: '/api/v1/datasets/{kb}/chunks', api: 'ragflow', admin: true },
  { method: 'DELETE', path: '/api/v1/datasets/{kb}/chunks', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/datasets/{kb}/documents/{doc}/chunks', api: 'ragflow', admin: true },
  { method: 'POST', path: '/api/v1/retrieval', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/mcp/servers', api: 'ragflow', admin: true },
  { method: 'POST', path: '/api/v1/mcp/servers', api: 'ragflow', admin: true },
  { method: 'POST', path: '/api/v1/mcp/servers/import', api: 'ragflow', admin: true },
  { method: 'GET', path: '/api/v1/mcp/servers/{mcp}', api: 'ragflow', admin: true },
  { method: 'PUT', path: '/api/v1/mcp/servers/{mcp}', api: 'ragflow', admin: true },
  { method: 'DELETE', path: '/api/v1/mcp/servers/{mcp}', api: 'ragflow', admin: true },
  { method: 'POST', path: '/api/v1/mcp/servers/{mcp}/test', api: 'ragflow', admin: true },
  // stands for every RAGFlow route Easel answers as unsupported (the catch-all under /api/v1)
  { method: 'GET', path: '/api/v1/chats', api: 'ragflow' },
];

const RAGFLOW_CODES = new Set([0, 101, 102, 103, 109]);
/** RAGFlow itself answers a missing or malformed Authorization with code 0 and `data: false`. */
const RAGFLOW_AUTH_QUIRKS = new Set(["`Authorization` can't be empty", 'Please check your authorization format.']);
const STACK = /\n\s+at |node:internal|\.ts:\d+:\d+|\/lib\/[a-z-]+\//;

/** Why an answer breaks the documented contract, or null. `api` is that of the route asked. */
export function contractViolation(api: Api, res: RawResponse): string | null {
  if (res.status >= 500) return `HTTP ${res.status}: ${res.text.slice(0, 300)}`;
  const type = String(res.headers['content-type'] ?? '');
  // the playground's page and assets are source by design; errors and API answers never are
  const isAsset = /^text\/(html|javascript|css)/.test(type);
  if (!isAsset && STACK.test(res.text) && !res.text.startsWith('{"openapi"')) return `a stack trace or source path in the body: ${res.text.slice(0, 300)}`;
  if (res.status >= 400) return nativeError(res);
  if (type.includes('text/event-stream')) return api === 'ragflow' ? ragflowStream(res.text) : nativeStream(res.text);
  if (api === 'ragflow' && res.status === 200) return ragflowEnvelope(res);
  if (type.includes('json') && res.json === undefined && res.text !== '') return `a JSON content type with a body that is not JSON: ${res.text.slice(0, 200)}`;
  return null;
}

/** Native errors: `{code, error}` with a documented code whose status is the one answered. */
export function nativeError(res: RawResponse): string | null {
  const body = res.json as { code?: unknown; error?: unknown } | undefined;
  if (!body || typeof body !== 'object') return `HTTP ${res.status} without a JSON error body: ${res.text.slice(0, 200)}`;
  if (typeof body.code !== 'string' || !isErrorCode(body.code)) return `HTTP ${res.status} with an undocumented code: ${res.text.slice(0, 200)}`;
  if (STATUS_BY_CODE[body.code] !== res.status) return `code ${body.code} answered with HTTP ${res.status} (documented: ${STATUS_BY_CODE[body.code]})`;
  if (typeof body.error !== 'string' || body.error === '') return `HTTP ${res.status} without an error message: ${res.text.slice(0, 200)}`;
  return null;
}

function ragflowEnvelope(res: RawResponse): string | null {
  const body = res.json as { code?: unknown; message?: unknown; data?: unknown; object?: unknown } | undefined;
  if (!body || typeof body !== 'object') return `RAGFlow route answered 200 without a JSON body: ${res.text.slice(0, 200)}`;
  if (body.object === 'chat.completion' && body.code === undefined) return null; // the OpenAI-compatible success
  if (typeof body.code !== 'number') return `RAGFlow envelope without a numeric code: ${res.text.slice(0, 200)}`;
  if (!RAGFLOW_CODES.has(body.code)) return `RAGFlow code ${body.code} (100 = an unexpected error): ${res.text.slice(0, 300)}`;
  if (body.code !== 0 && (typeof body.message !== 'string' || body.message === '')) return `RAGFlow error without a message: ${res.text.slice(0, 200)}`;
  if (body.code === 0 && body.data === false && !RAGFLOW_AUTH_QUIRKS.has(String(body.message))) return `code 0 with data false: ${res.text.slice(0, 200)}`;
  return null;
}

/** Native SSE: ends with turn_response, or turn_error carrying a documented client-side code. */
function nativeStream(text: string): string | null {
  const blocks = text.split('\n\n').filter((b) => b.trim() !== '');
  const last = blocks.at(-1) ?? '';
  const event = /^event: (.*)$/m.exec(last)?.[1];
  if (event === 'turn_response') return null;
  if (event !== 'turn_error') return `an SSE stream that does not end with turn_response or turn_error: ${last.slice(0, 200)}`;
  const data = JSON.parse(/^data: (.*)$/m.exec(last)?.[1] ?? '{}') as { code?: string };
  const status = data.code !== undefined && isErrorCode(data.code) ? STATUS_BY_CODE[data.code] : undefined;
  if (status === undefined || status >= 500) return `a stream ending with turn_error ${data.code}: ${last.slice(0, 300)}`;
  return null;
}

/** RAGFlow / OpenAI SSE: `data:` frames ending with [DONE]; no frame reports an internal error. */
function ragflowStream(text: string): string | null {
  const frames = text.split('\n\n').filter((b) => b.trim() !== '').map((b) => b.replace(/^data: ?/, ''));
  if (frames.at(-1) !== '[DONE]') return `a RAGFlow stream that does not end with [DONE]: ${text.slice(-200)}`;
  for (const f of frames.slice(0, -1)) {
    if (/internal error/.test(f)) return `a RAGFlow stream frame with an internal error: ${f.slice(0, 300)}`;
  }
  return null;
}

/**
 * Everything an answer says, minus what differs between two equal answers: the ids given
 * (replaced by `<id>`), and what each answer makes afresh (message and session ids, times).
 */
export function comparable(res: RawResponse, ...ids: string[]): { status: number; body: unknown } {
  let text = res.text;
  for (const id of ids) text = text.split(id).join('<id>');
  text = text
    .replace(/"(message_id|session_id|task_id|id|run_id)":"[0-9a-f]{32}"/g, '"$1":"<new>"')
    .replace(/"(created_at|create_time|update_time|created)":\d+(\.\d+)?/g, '"$1":0')
    .replace(/"(created_at|updated_at|create_date|update_date)":"[^"]*"/g, '"$1":"<t>"');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // SSE or text: compared as text
  }
  return { status: res.status, body };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
