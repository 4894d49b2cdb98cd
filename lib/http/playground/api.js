// @ts-check
/**
 * The playground's side of the native API: where it is (`<prefix>/workflows/v1`, the prefix
 * being whatever the page is served under), the credentials a request carries, and reading a
 * turn's server-sent events from a POST (EventSource cannot POST).
 *
 * Credentials (docs/access.md):
 * - the API key, in this tab's sessionStorage (memory where storage is blocked, e.g. some iframes);
 * - an end-user token (`Easel-End-User-Token`), the same way, when the embedding site gave one;
 * - each run's token (`Easel-Run-Token`), in localStorage with the run's workflow, so that a
 *   visitor's reloads and other tabs reach their runs and list them, and no other browser does.
 * `?key=` and `user_token` (in the query or, better, the fragment, which browsers never send)
 * are taken once, moved to storage and removed from the address bar.
 */

/** @typedef {{event: string, data: any}} EngineEvent */
/** @typedef {{code: string, error: string, current_turn_number?: number | null, status?: string, fields?: {field: string, message: string}[]}} ApiErrorBody */
/** @typedef {{token: string, workflowId: string | null, at: number}} HeldRun */

const route = /^(.*?)\/playground(?:\/([^/]+))?\/?$/.exec(location.pathname);
const PREFIX = route?.[1] ?? '';
/** The native API of the server that served the page. */
export const API = `${PREFIX}/workflows/v1`;
/** The RAGFlow-compatible API of the same server. */
/** `/playground/{workflow_id}` shows that workflow only. */
export const FIXED_WORKFLOW = route?.[2] ? decodeURIComponent(route[2]) : null;

/** A value in this tab's sessionStorage, in memory where storage is blocked. @param {string} name */
function tabValue(name) {
  /** @type {string | null} */
  let memory = null;
  return {
    /** @returns {string | null} */
    get() {
      try {
        return sessionStorage.getItem(name) ?? memory;
      } catch {
        return memory;
      }
    },
    /** @param {string} value */
    set(value) {
      memory = value;
      try {
        sessionStorage.setItem(name, value);
      } catch {
        // storage blocked: memory only
      }
    },
    clear() {
      memory = null;
      try {
        sessionStorage.removeItem(name);
      } catch {
        // storage blocked
      }
    },
  };
}

export const keyStore = tabValue('easel.playground.key');
export const userTokenStore = tabValue('easel.playground.userToken');

const RUN_TOKENS_STORAGE = 'easel.runTokens';
/** Runs whose tokens a browser keeps: the newest. */
const HELD_RUNS = 50;
/** @type {Record<string, HeldRun>} */
let memoryRunTokens = {};

export const runTokens = {
  /** @returns {Record<string, HeldRun>} */
  all() {
    /** @type {Record<string, unknown>} */
    let stored;
    try {
      stored = JSON.parse(localStorage.getItem(RUN_TOKENS_STORAGE) ?? 'null') ?? memoryRunTokens;
    } catch {
      stored = memoryRunTokens;
    }
    /** @type {Record<string, HeldRun>} */
    const runs = {};
    for (const [runId, value] of Object.entries(stored)) {
      // a bare token string: how pages before run lists kept them
      if (typeof value === 'string') runs[runId] = { token: value, workflowId: null, at: 0 };
      else if (value && typeof value === 'object' && typeof (/** @type {HeldRun} */ (value).token) === 'string') runs[runId] = /** @type {HeldRun} */ (value);
    }
    return runs;
  },
  /** @param {string} runId */
  get(runId) {
    return this.all()[runId]?.token;
  },
  /**
   * @param {string} token `rt1.<run id>.<key id>.<mac>`
   * @param {string | null} workflowId the workflow the run was started on, when known
   */
  remember(token, workflowId) {
    const runId = token.split('.')[1];
    if (!runId) return;
    const held = this.all();
    const previous = held[runId];
    held[runId] = { token, workflowId: workflowId ?? previous?.workflowId ?? null, at: previous?.at || Date.now() };
    this.save(Object.entries(held).sort(([, a], [, b]) => a.at - b.at).slice(-HELD_RUNS));
  },
  /** Forgets a run that no longer exists. @param {string} runId */
  forget(runId) {
    this.save(Object.entries(this.all()).filter(([id]) => id !== runId));
  },
  /** @param {[string, HeldRun][]} entries */
  save(entries) {
    memoryRunTokens = Object.fromEntries(entries);
    try {
      localStorage.setItem(RUN_TOKENS_STORAGE, JSON.stringify(memoryRunTokens));
    } catch {
      // storage blocked: memory only
    }
  },
};

/** `?key=` and `user_token` (query or fragment) are accepted once: kept in sessionStorage, removed from the URL and history. */
export function adoptCredentialsFromUrl() {
  const url = new URL(location.href);
  const fragment = new URLSearchParams(url.hash.slice(1));
  const key = url.searchParams.get('key');
  const inFragment = fragment.get('user_token');
  const userToken = inFragment ?? url.searchParams.get('user_token');
  if (key === null && userToken === null) return;
  url.searchParams.delete('key');
  url.searchParams.delete('user_token');
  if (inFragment !== null) {
    fragment.delete('user_token');
    url.hash = fragment.toString();
  }
  history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  if (key !== null && key.trim() !== '') keyStore.set(key.trim());
  if (userToken !== null && userToken.trim() !== '') userTokenStore.set(userToken.trim());
}

export class ApiFailure extends Error {
  /** @param {number} status @param {ApiErrorBody} body */
  constructor(status, body) {
    super(body.error);
    this.status = status;
    this.body = body;
  }
}

/** @param {Response} res @returns {Promise<ApiErrorBody>} */
async function errorBody(res) {
  const text = await res.text().catch(() => '');
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed.code === 'string') return parsed;
  } catch {
    // not JSON
  }
  return { code: `http_${res.status}`, error: text.slice(0, 200) || `HTTP ${res.status}` };
}

/** The request's credentials: the key, the end-user token, and the token of the run it is about. @param {string} path @param {RequestInit} init */
function credentials(path, init) {
  const headers = new Headers(init.headers);
  const key = keyStore.get();
  if (key) headers.set('authorization', `Bearer ${key}`);
  const userToken = userTokenStore.get();
  if (userToken) headers.set('easel-end-user-token', userToken);
  // the run this request is about, by its path or its body: its token goes with it
  const runId = /\/workflow-runs\/([0-9a-f]{32})/.exec(path)?.[1] ?? /\/runs\/([0-9a-f]{32})\//.exec(path)?.[1] ?? (typeof init.body === 'string' ? /"run_id":"([0-9a-f]{32})"/.exec(init.body)?.[1] : undefined);
  const runToken = runId ? runTokens.get(runId) : undefined;
  if (runToken) headers.set('easel-run-token', runToken);
  return headers;
}

/**
 * A request to the native API (`base` another API of the server) with the page's credentials;
 * a run token the answer carries is kept. Anything but a 2xx throws an ApiFailure.
 * @param {string} path @param {RequestInit} [init] @param {string} [base]
 */
export async function call(path, init = {}, base = API) {
  /** @type {Response} */
  let res;
  try {
    res = await fetch(base + path, { ...init, headers: credentials(path, init) });
  } catch {
    throw new ApiFailure(0, { code: 'network', error: 'cannot reach the server' });
  }
  const issued = res.headers.get('easel-run-token');
  if (issued) runTokens.remember(issued, /^\/workflows\/([^/]+)\/execute/.exec(path)?.[1] ?? null);
  if (!res.ok) throw new ApiFailure(res.status, await errorBody(res));
  return res;
}

/** @param {string} path @returns {Promise<any>} */
export async function getJson(path) {
  return (await call(path)).json();
}

/**
 * What a workflow's Begin says first, as the workflow's own view gives it (`prologue`: none in
 * webhook mode or with `enablePrologue: false`, RAGFlow's default greeting when it sets none);
 * '' when the key may not read the workflow.
 * @param {string} workflowId @returns {Promise<string>}
 */
export async function readPrologue(workflowId) {
  try {
    const body = await getJson(`/workflows/${encodeURIComponent(workflowId)}`);
    return typeof body?.prologue === 'string' ? body.prologue : '';
  } catch {
    return '';
  }
}

/** @param {unknown} error @returns {ApiFailure} */
export function asFailure(error) {
  if (error instanceof ApiFailure) return error;
  return new ApiFailure(0, { code: 'client_error', error: error instanceof Error ? error.message : String(error) });
}

/**
 * The frames of a server-sent event stream, as they arrive.
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<EngineEvent>}
 */
export async function* readSse(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (value) buffer = (buffer + decoder.decode(value, { stream: true })).replace(/\r\n/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const frame = parseFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (frame) yield frame;
      }
      if (done) break;
    }
    const last = parseFrame(buffer);
    if (last) yield last;
  } finally {
    reader.releaseLock();
  }
}

/** @param {string} block @returns {EngineEvent | null} */
function parseFrame(block) {
  let event = 'message';
  /** @type {string[]} */
  const data = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return null;
  const text = data.join('\n');
  try {
    return { event, data: JSON.parse(text) };
  } catch {
    return { event, data: text };
  }
}
