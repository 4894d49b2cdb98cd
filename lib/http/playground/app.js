// @ts-check
/**
 * The Easel playground: one ES module, no framework, no build step. It talks to the native
 * API of the server that served it (`<prefix>/workflows/v1/...`) with the key the user entered,
 * which stays in this tab's sessionStorage. A turn is POSTed with `Accept: text/event-stream`
 * and read through fetch's ReadableStream (EventSource cannot POST): `message` deltas stream
 * into the transcript, every event goes to the timeline, and `turn_response` (the committed
 * body) or `turn_error` (nothing committed) ends it. A pause is rendered as a real form.
 *
 * URL: /playground (pick a workflow), /playground/{workflow_id} (that one only; for iframes),
 * `?run=<run_id>` reopens a run, `?key=<key>` is taken once (for embeds: use an execute key),
 * moved to sessionStorage and removed from the address bar.
 *
 * Type-checked with lib/http/playground/tsconfig.json (test/playground/assets.test.ts).
 */

/** @typedef {import('./fields.js').Field} Field */
/** @typedef {{component_id: string, tips: string, inputs: Record<string, Field>}} Hint */
/** @typedef {{event: string, data: any}} EngineEvent */
/**
 * What a turn's response and a run's description have in common.
 * @typedef {{run_id: string, workflow_id?: string, status: string, turn_number: number, is_terminal?: boolean, turn_in_progress?: number | null, next_input_hint: Hint | null, stand_in?: {model: string, component_ids: string[], notice: string}}} RunState
 */
/** @typedef {{code: string, error: string, current_turn_number?: number | null, status?: string, fields?: {field: string, message: string}[]}} ApiErrorBody */
/** @typedef {{turn_number: number, request?: {run_input?: {query?: string, inputs?: Record<string, unknown>, command?: string}}, response: {events?: EngineEvent[], status?: string, turn_number?: number}}} StoredTurn */
/** @typedef {import('./fields.js').FieldControl} FieldControl */

import { display, fieldControl, h } from './fields.js';

const KEY_STORAGE = 'easel.playground.key';
const route = /^(.*?)\/playground(?:\/([^/]+))?\/?$/.exec(location.pathname);
const API = `${route?.[1] ?? ''}/workflows/v1`;
const FIXED_WORKFLOW = route?.[2] ? decodeURIComponent(route[2]) : null;

// ---- the key: sessionStorage (memory where storage is blocked, e.g. some iframes) ----------

/** @type {string | null} */
let memoryKey = null;
const keyStore = {
  get() {
    try {
      return sessionStorage.getItem(KEY_STORAGE) ?? memoryKey;
    } catch {
      return memoryKey;
    }
  },
  /** @param {string} key */
  set(key) {
    memoryKey = key;
    try {
      sessionStorage.setItem(KEY_STORAGE, key);
    } catch {
      // storage blocked: memory only
    }
  },
  clear() {
    memoryKey = null;
    try {
      sessionStorage.removeItem(KEY_STORAGE);
    } catch {
      // storage blocked
    }
  },
};

// ---- run tokens: what opens each run to an execute key (docs/access.md); in localStorage, ----
// ---- so a visitor's other tabs and reloads reach their runs, and no other browser does ----

const RUN_TOKENS_STORAGE = 'easel.runTokens';
/** @type {Record<string, string>} */
let memoryRunTokens = {};
const runTokens = {
  /** @returns {Record<string, string>} */
  all() {
    try {
      return JSON.parse(localStorage.getItem(RUN_TOKENS_STORAGE) ?? 'null') ?? memoryRunTokens;
    } catch {
      return memoryRunTokens;
    }
  },
  /** @param {string} runId */
  get(runId) {
    return this.all()[runId];
  },
  /** @param {string} token `rt1.<run id>.<key id>.<mac>` */
  remember(token) {
    const runId = token.split('.')[1];
    if (!runId) return;
    // the newest 50 runs of this tab
    const entries = Object.entries({ ...this.all(), [runId]: token }).slice(-50);
    memoryRunTokens = Object.fromEntries(entries);
    try {
      localStorage.setItem(RUN_TOKENS_STORAGE, JSON.stringify(memoryRunTokens));
    } catch {
      // storage blocked: memory only
    }
  },
};

/** `?key=` is accepted once (embeds): kept in sessionStorage, removed from the URL and history. */
function adoptKeyFromUrl() {
  const url = new URL(location.href);
  const key = url.searchParams.get('key');
  if (key === null) return;
  url.searchParams.delete('key');
  history.replaceState(history.state, '', url.pathname + url.search + url.hash);
  if (key.trim() !== '') keyStore.set(key.trim());
}

// ---- the API -------------------------------------------------------------------------------

class ApiFailure extends Error {
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

/** @param {string} path @param {RequestInit} [init] */
async function call(path, init = {}) {
  const headers = new Headers(init.headers);
  const key = keyStore.get();
  if (key) headers.set('authorization', `Bearer ${key}`);
  // the run this request is about, by its path or its body: its token goes with it
  const runId = /\/workflow-runs\/([0-9a-f]{32})/.exec(path)?.[1] ?? (typeof init.body === 'string' ? /"run_id":"([0-9a-f]{32})"/.exec(init.body)?.[1] : undefined);
  const runToken = runId ? runTokens.get(runId) : undefined;
  if (runToken) headers.set('easel-run-token', runToken);
  /** @type {Response} */
  let res;
  try {
    res = await fetch(API + path, { ...init, headers });
  } catch {
    throw new ApiFailure(0, { code: 'network', error: 'cannot reach the server' });
  }
  const issued = res.headers.get('easel-run-token');
  if (issued) runTokens.remember(issued);
  if (!res.ok) throw new ApiFailure(res.status, await errorBody(res));
  return res;
}

/** @param {string} path @returns {Promise<any>} */
async function getJson(path) {
  return (await call(path)).json();
}

/** @param {unknown} error @returns {ApiFailure} */
function asFailure(error) {
  if (error instanceof ApiFailure) return error;
  return new ApiFailure(0, { code: 'client_error', error: error instanceof Error ? error.message : String(error) });
}

/**
 * The frames of a server-sent event stream, as they arrive.
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<EngineEvent>}
 */
async function* readSse(body) {
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

// ---- DOM helpers ---------------------------------------------------------------------------

/**
 * @template {HTMLElement} T
 * @param {string} id
 * @param {new () => T} type
 * @returns {T}
 */
function byId(id, type) {
  const node = document.getElementById(id);
  if (!(node instanceof type)) throw new Error(`the page has no #${id}`);
  return node;
}

const ui = {
  status: byId('status-line', HTMLElement),
  keyForm: byId('key-form', HTMLFormElement),
  keyInput: byId('key-input', HTMLInputElement),
  keyInfo: byId('key-info', HTMLElement),
  keyMasked: byId('key-masked', HTMLElement),
  keyChange: byId('key-change', HTMLButtonElement),
  picker: byId('workflow-picker', HTMLElement),
  select: byId('workflow-select', HTMLSelectElement),
  fixed: byId('workflow-fixed', HTMLElement),
  newRun: byId('new-run', HTMLButtonElement),
  alert: byId('alert', HTMLElement),
  transcript: byId('transcript', HTMLOListElement),
  composer: byId('composer', HTMLFormElement),
  input: byId('composer-input', HTMLTextAreaElement),
  send: byId('send-button', HTMLButtonElement),
  factRun: byId('fact-run', HTMLElement),
  factStatus: byId('fact-status', HTMLElement),
  factTurn: byId('fact-turn', HTMLElement),
  timeline: byId('timeline', HTMLOListElement),
};

/** @param {string} text @param {boolean} [busy] */
function setStatus(text, busy = false) {
  ui.status.replaceChildren(busy ? h('span', { class: 'spinner', 'aria-hidden': 'true' }) : '', text);
  ui.status.classList.toggle('busy', busy);
}

/** @param {string} text @param {'error' | 'info'} [kind] */
function showAlert(text, kind = 'error') {
  ui.alert.textContent = text;
  ui.alert.className = `alert alert-${kind}`;
  ui.alert.hidden = false;
}

function clearAlert() {
  ui.alert.hidden = true;
  ui.alert.textContent = '';
}

/** Appends to the transcript, following the bottom unless the reader scrolled up. */
/** @param {HTMLElement} entry */
function addEntry(entry) {
  const list = ui.transcript;
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
  list.append(entry);
  if (atBottom) list.scrollTop = list.scrollHeight;
  return entry;
}

function followBottom() {
  const list = ui.transcript;
  if (list.scrollHeight - list.scrollTop - list.clientHeight < 160) list.scrollTop = list.scrollHeight;
}

/** @param {string} text */
function userBubble(text) {
  return addEntry(h('li', { class: 'entry user' }, [h('span', { class: 'who', text: 'You' }), h('p', { class: 'text', text })]));
}

/** @param {[string, string][]} rows */
function answersBubble(rows) {
  const list = h('dl', { class: 'answers' });
  for (const [label, value] of rows) list.append(h('dt', { text: label }), h('dd', { text: value }));
  return h('li', { class: 'entry user' }, [h('span', { class: 'who', text: 'You answered' }), rows.length ? list : h('p', { class: 'text muted', text: '(nothing)' })]);
}

/** @param {string} text @param {'info' | 'error' | 'done' | 'warn'} [kind] */
function note(text, kind = 'info') {
  return addEntry(h('li', { class: `entry note note-${kind}`, text }));
}

/** @param {HTMLElement} entry @param {string} why */
function markNotSent(entry, why) {
  entry.classList.add('failed');
  entry.append(h('span', { class: 'failed-tag', text: why }));
}

// ---- state ---------------------------------------------------------------------------------

/** @typedef {{runId: string, turnNumber: number, status: string, isTerminal: boolean, hint: Hint | null}} Run */

const state = {
  /** @type {string | null} */
  workflowId: FIXED_WORKFLOW,
  /** @type {Run | null} */
  run: null,
  busy: false,
  /** The last turn whose messages are on screen. */
  shownTurn: 0,
  /** @type {HTMLElement | null} the open form's transcript entry */
  formEntry: null,
  /** @type {HTMLButtonElement | null} */
  formSubmit: null,
};

/** @param {boolean} busy @param {string} [label] */
function setBusy(busy, label = '') {
  state.busy = busy;
  ui.send.disabled = busy || Boolean(state.run?.isTerminal);
  ui.newRun.disabled = busy;
  ui.select.disabled = busy;
  ui.send.textContent = busy ? 'Running…' : 'Send';
  ui.transcript.setAttribute('aria-busy', String(busy));
  if (state.formSubmit) state.formSubmit.disabled = busy;
  if (busy) setStatus(label, true);
  else describeRun();
}

const STATUS_TEXT = /** @type {Record<string, string>} */ ({
  not_started: 'not started',
  running: 'a turn is running',
  waiting_for_input: 'waiting for your answers',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
  aborted_looping_risk: 'aborted (loop safety)',
});

function describeRun() {
  const run = state.run;
  ui.factRun.textContent = run ? run.runId : '–';
  ui.factRun.title = run ? run.runId : '';
  ui.factTurn.textContent = run ? String(run.turnNumber) : '–';
  ui.factStatus.textContent = run ? run.status : '–';
  ui.factStatus.className = `badge${run ? ` badge-${run.status}` : ''}`;
  if (!state.workflowId) setStatus(keyStore.get() ? 'Pick a workflow.' : 'Enter an API key to start.');
  else if (!run) setStatus('Send a message to start a run.');
  else setStatus(`Turn ${run.turnNumber}: ${STATUS_TEXT[run.status] ?? run.status}${run.isTerminal ? ' (finished: start a new run)' : ''}`);
  ui.send.disabled = state.busy || Boolean(run?.isTerminal);
  ui.input.disabled = Boolean(run?.isTerminal);
}

function syncUrl() {
  const url = new URL(location.href);
  if (!FIXED_WORKFLOW && state.workflowId) url.searchParams.set('workflow', state.workflowId);
  if (state.run) url.searchParams.set('run', state.run.runId);
  else url.searchParams.delete('run');
  history.replaceState(history.state, '', url.pathname + url.search + url.hash);
}

/** After a turn or a reload: the run's state, and its form if it waits for one. @param {RunState} s */
function applyRunState(s) {
  state.run = { runId: s.run_id, turnNumber: s.turn_number, status: s.status, isTerminal: Boolean(s.is_terminal), hint: s.next_input_hint ?? null };
  closeForm();
  if (s.status === 'waiting_for_input' && s.next_input_hint) renderForm(s.next_input_hint, state.run);
  describeRun();
  syncUrl();
}

// ---- the events of a turn ------------------------------------------------------------------

class TurnView {
  /** @param {number} turn @param {boolean} live */
  constructor(turn, live) {
    this.turn = turn;
    this.live = live;
    this.started = performance.now();
    /** @type {HTMLElement | null} */
    this.bubble = null;
    /** @type {HTMLElement[]} */
    this.bubbles = [];
    /** @type {HTMLElement | null} */
    this.chunkItem = null;
    this.chunks = 0;
  }

  /** @param {string} name @param {any} data */
  onEvent(name, data) {
    if (name === 'message') {
      this.message(typeof data?.content === 'string' ? data.content : display(data?.content));
      return;
    }
    this.chunkItem = null;
    if (name === 'message_end') this.endMessage();
    this.timeline(name, eventDetail(name, data), name.startsWith('workflow_failed') || Boolean(data?.error) ? 'error' : '');
    if (name === 'workflow_failed') note(`The workflow failed: ${data?.error?.message ?? 'unknown error'}`, 'error');
    else if (name === 'workflow_cancelled') note('The run was cancelled.');
    else if (name === 'workflow_aborted') note(`The run was stopped by the loop-safety budget (${data?.steps ?? '?'} steps).`, 'error');
  }

  /** @param {string} delta */
  message(delta) {
    if (!this.bubble) {
      const text = h('p', { class: 'text' });
      this.bubble = addEntry(h('li', { class: 'entry assistant', 'aria-busy': this.live ? 'true' : null }, [h('span', { class: 'who', text: 'Assistant' }), text]));
      this.bubbles.push(this.bubble);
    }
    const text = this.bubble.querySelector('.text');
    if (text) text.textContent += delta;
    followBottom();
    this.chunks += 1;
    if (!this.chunkItem) {
      this.chunks = 1;
      this.chunkItem = this.timeline('message', '');
    }
    const detail = this.chunkItem.querySelector('.ev-detail');
    if (detail) detail.textContent = this.live ? `${this.chunks} chunk${this.chunks === 1 ? '' : 's'}` : '';
  }

  endMessage() {
    this.bubble?.removeAttribute('aria-busy');
    this.bubble = null;
  }

  /** @param {string} name @param {string} detail @param {string} [kind] */
  timeline(name, detail, kind = '') {
    const item = h('li', { class: `ev${kind ? ` ev-${kind}` : ''}` }, [
      h('span', { class: 'ev-turn', text: `T${this.turn}`, title: `turn ${this.turn}` }),
      h('span', { class: 'ev-name', text: name }),
      h('span', { class: 'ev-detail', text: detail }),
      this.live ? h('time', { class: 'ev-time', text: `+${Math.round(performance.now() - this.started)} ms` }) : null,
    ]);
    ui.timeline.append(item);
    ui.timeline.scrollTop = ui.timeline.scrollHeight;
    return item;
  }

  finish() {
    this.endMessage();
  }

  /** The streamed events were not committed (turn_error): say so on what was shown. */
  discard() {
    for (const b of this.bubbles) markNotSent(b, 'not committed');
  }
}

/** @param {string} name @param {any} data */
function eventDetail(name, data) {
  switch (name) {
    case 'node_started':
      return String(data?.component_name ?? data?.component_id ?? '');
    case 'node_finished':
      return `${data?.component_name ?? data?.component_id ?? ''}${data?.error ? `: ${data.error}` : ''}`;
    case 'user_inputs':
      return `asks: ${Object.keys(data?.inputs ?? {}).join(', ')}`;
    case 'workflow_finished':
      return typeof data?.elapsed_time === 'number' ? `${data.elapsed_time.toFixed(3)} s` : '';
    case 'workflow_failed':
      return String(data?.error?.message ?? '');
    default:
      return '';
  }
}

// ---- turns ---------------------------------------------------------------------------------

/**
 * Runs one turn as a stream. `userEntry` is what the user sent, already on screen.
 * @param {{query?: string, inputs?: Record<string, unknown>}} runInput
 * @param {HTMLElement | null} userEntry
 * @returns {Promise<{ok: true} | {ok: false, failure: ApiFailure}>}
 */
async function runTurn(runInput, userEntry) {
  const workflowId = state.workflowId;
  if (!workflowId) return { ok: false, failure: new ApiFailure(0, { code: 'no_workflow', error: 'pick a workflow first' }) };
  const run = state.run;
  /** @type {Record<string, unknown>} */
  const body = { run_input: runInput };
  if (run) Object.assign(body, { run_id: run.runId, turn_number: run.turnNumber });
  const turn = run ? run.turnNumber + 1 : 1;
  clearAlert();
  setBusy(true, `Running turn ${turn}…`);
  const view = new TurnView(turn, true);
  try {
    const res = await call(`/workflows/${encodeURIComponent(workflowId)}/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(body),
    });
    if (!res.body) throw new ApiFailure(0, { code: 'stream_broken', error: 'the response has no body' });
    /** @type {RunState | null} */
    let committed = null;
    /** @type {ApiErrorBody | null} */
    let lost = null;
    for await (const frame of readSse(res.body)) {
      if (frame.event === 'turn_response') committed = frame.data;
      else if (frame.event === 'turn_error') lost = frame.data;
      else view.onEvent(frame.event, frame.data);
    }
    view.finish();
    if (committed) {
      view.timeline('turn_response', `${committed.status} · turn ${committed.turn_number}`, 'end');
      state.shownTurn = committed.turn_number;
      // a stand-in answered in place of a model: said where the answer is read
      if (committed.stand_in) note(`Answered by the ${committed.stand_in.model} stand-in, not a language model (${committed.stand_in.component_ids.join(', ')}): ${committed.stand_in.notice}`, 'warn');
      applyRunState(committed);
      if (committed.status === 'completed') note(`Completed (turn ${committed.turn_number}).`, 'done');
      return { ok: true };
    }
    view.discard();
    if (lost) {
      view.timeline('turn_error', lost.code, 'error');
      throw new ApiFailure(409, lost);
    }
    throw new ApiFailure(0, { code: 'stream_broken', error: 'the connection closed before the turn ended' });
  } catch (error) {
    const failure = asFailure(error);
    if (userEntry && failure.body.code !== 'invalid_inputs') markNotSent(userEntry, 'not sent');
    await explain(failure);
    return { ok: false, failure };
  } finally {
    setBusy(false);
  }
}

/** Says what went wrong, and reloads the run where the server moved on without us. @param {ApiFailure} f */
async function explain(f) {
  const { code, error } = f.body;
  const where = () => (state.run ? ` The run is now at turn ${state.run.turnNumber} (${STATUS_TEXT[state.run.status] ?? state.run.status}).` : '');
  switch (code) {
    case 'turn_conflict':
      await reloadRun();
      showAlert(`This turn was already answered, in another tab or by another client, so your submission was not applied. The run has been reloaded.${where()}`);
      break;
    case 'turn_in_progress':
      await reloadRun();
      showAlert(`Another turn of this run is still running. The run has been reloaded; try again when it ends.${where()}`);
      break;
    case 'run_finished':
      await reloadRun();
      showAlert('This run has finished and takes no more turns: start a new run.');
      break;
    case 'not_waiting_for_input':
      await reloadRun();
      showAlert(`This run is no longer waiting for a form; it has been reloaded.${where()}`);
      break;
    case 'stream_broken':
      await reloadRun();
      showAlert(`The connection closed before the turn ended; the run has been reloaded.${where()}`);
      break;
    case 'invalid_inputs':
      showAlert(`Some answers were refused: ${(f.body.fields ?? []).map((x) => `${x.field} (${x.message})`).join('; ') || error}`);
      break;
    case 'unauthorized':
      showAlert('The server refused the API key (unknown or revoked). Enter a valid key.');
      askForKey();
      break;
    case 'forbidden':
      showAlert(`This key may not do that: ${error}`);
      break;
    case 'not_found':
      showAlert(`Not found: ${error}. The workflow or run does not exist, or this key may not use it.`);
      break;
    case 'network':
      showAlert('Cannot reach the Easel server. Check that it is running and try again.');
      break;
    case 'unavailable':
      showAlert('The server is unavailable right now; nothing was committed. Try again in a moment.');
      break;
    default:
      showAlert(`${error} (${code})`);
  }
}

/** Reads the run again, catches up on the turns not on screen, and shows its current form. */
async function reloadRun(runId = state.run?.runId) {
  if (!runId) return;
  try {
    const run = /** @type {RunState} */ (await getJson(`/workflow-runs/${encodeURIComponent(runId)}`));
    if (!FIXED_WORKFLOW && run.workflow_id && run.workflow_id !== state.workflowId) {
      state.workflowId = run.workflow_id;
      ui.select.value = run.workflow_id;
    }
    let cursor = state.shownTurn > 0 ? String(state.shownTurn) : '';
    /** the form the previous turn paused at: its labels name the next turn's answers @type {Record<string, Field> | undefined} */
    let asked = state.shownTurn > 0 ? state.run?.hint?.inputs : undefined;
    for (let page = 0; page < 50; page++) {
      const turns = await getJson(`/workflow-runs/${encodeURIComponent(runId)}/turns?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      for (const t of /** @type {StoredTurn[]} */ (turns.items)) {
        if (t.turn_number <= state.shownTurn) continue;
        showStoredTurn(t, asked);
        asked = [...(t.response.events ?? [])].reverse().find((e) => e.event === 'user_inputs')?.data?.inputs;
        state.shownTurn = t.turn_number;
      }
      if (!turns.next_cursor) break;
      cursor = turns.next_cursor;
    }
    applyRunState(run);
    if (run.status === 'running') note(`Turn ${run.turn_in_progress ?? run.turn_number + 1} is running elsewhere; reload the page later to see it.`);
  } catch (error) {
    const failure = asFailure(error);
    showAlert(`Could not reload the run: ${failure.body.error} (${failure.body.code}).`);
    if (failure.body.code === 'unauthorized') askForKey();
  }
}

/**
 * A committed turn read back: what was sent, then its events. Answers are named by the labels
 * of the form they answered (`asked`, from the turn before), as they were when sent.
 * @param {StoredTurn} t @param {Record<string, Field>} [asked]
 */
function showStoredTurn(t, asked) {
  const input = t.request?.run_input ?? {};
  if (typeof input.query === 'string' && input.query !== '') userBubble(input.query);
  if (input.inputs && typeof input.inputs === 'object') {
    const rows = Object.entries(input.inputs).map(([key, value]) => {
      const field = asked?.[key];
      const chosen = field?.decisions?.find((d) => d.id === value);
      return /** @type {[string, string]} */ ([field?.name || key, chosen ? chosen.label : display(value)]);
    });
    addEntry(answersBubble(rows));
  }
  if (input.command === 'stop') note('Stop requested.');
  const view = new TurnView(t.turn_number, false);
  for (const e of t.response.events ?? []) view.onEvent(e.event, e.data);
  view.finish();
  view.timeline('turn_response', `${t.response.status ?? ''} · turn ${t.turn_number}`, 'end');
}

// ---- forms ---------------------------------------------------------------------------------

function closeForm() {
  state.formEntry?.remove();
  state.formEntry = null;
  state.formSubmit = null;
}

/** @param {Hint} hint @param {Run} run */
function renderForm(hint, run) {
  const prefix = `f${run.turnNumber}`;
  const controls = Object.entries(hint.inputs).map(([key, field]) => fieldControl(prefix, key, field, upload));
  // a decision's buttons submit the form. Enter in a text field submits with the form's first
  // enabled submit button (Chromium skips disabled ones): with a decision that is a hidden
  // button whose submission is ignored, so Enter never picks a decision
  const decides = Object.values(hint.inputs).some((f) => f.decisions && f.decisions.length > 0);
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Submit', hidden: decides, tabindex: decides ? -1 : undefined, 'aria-hidden': decides ? 'true' : undefined });
  const fieldset = h('fieldset', {}, [
    h('legend', { id: `${prefix}-legend`, text: 'The workflow asks' }),
    hint.tips ? h('p', { class: 'tips', text: hint.tips }) : null,
    decides ? submit : null,
    ...controls.map((c) => c.root),
    h('p', { class: 'form-actions' }, [decides ? null : submit, h('span', { class: 'note', text: 'Fields marked * are required.' })]),
  ]);
  const form = h('form', { class: 'form', 'aria-labelledby': `${prefix}-legend` }, [fieldset]);
  const entry = addEntry(h('li', { class: 'entry form-entry' }, [form]));
  state.formEntry = entry;
  state.formSubmit = submit;
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (decides && !(e.submitter instanceof HTMLButtonElement && e.submitter.classList.contains('decision'))) return;
    void submitForm(form, fieldset, controls);
  });
  entry.scrollIntoView({ block: 'nearest' });
  controls[0]?.focusable.focus({ preventScroll: true });
}

/** @param {HTMLFormElement} form @param {HTMLFieldSetElement} fieldset @param {FieldControl[]} controls */
async function submitForm(form, fieldset, controls) {
  if (state.busy) return;
  for (const c of controls) c.showError(null);
  if (!form.reportValidity()) return;
  fieldset.disabled = true;
  /** @type {Record<string, unknown>} */
  const inputs = {};
  /** @type {[string, string][]} */
  const rows = [];
  try {
    for (const c of controls) {
      const value = await c.read();
      if (value === undefined) continue;
      inputs[c.key] = value;
      rows.push([c.label, c.describe ? c.describe(value) : display(value)]);
    }
  } catch (error) {
    fieldset.disabled = false;
    const failure = asFailure(error);
    if (failure.body.code === 'unauthorized') await explain(failure);
    else showAlert(`Could not read the form: ${failure.body.error}`);
    setBusy(false);
    return;
  }
  const formEntry = state.formEntry;
  const answers = answersBubble(rows);
  formEntry?.after(answers);
  if (formEntry) formEntry.hidden = true;
  const outcome = await runTurn({ inputs }, answers);
  if (outcome.ok) return; // the run's next state replaced the form
  if (outcome.failure.body.code === 'invalid_inputs' && formEntry === state.formEntry && formEntry) {
    answers.remove();
    formEntry.hidden = false;
    fieldset.disabled = false;
    const problems = outcome.failure.body.fields ?? [];
    for (const p of problems) controls.find((c) => c.key === p.field || p.field.endsWith(`.${c.key}`))?.showError(p.message);
    controls.find((c) => problems.some((p) => p.field === c.key || p.field.endsWith(`.${c.key}`)))?.focusable.focus();
  } else if (formEntry === state.formEntry && formEntry) {
    // not reloaded (e.g. the server was unreachable): the form stays, to try again
    answers.remove();
    formEntry.hidden = false;
    fieldset.disabled = false;
  }
}

/** @param {File} file @returns {Promise<string>} the file id */
async function upload(file) {
  setStatus(`Uploading ${file.name}…`, true);
  const data = new FormData();
  data.append('file', file, file.name);
  const res = await call('/files', { method: 'POST', body: data });
  const stored = await res.json();
  return String(stored.file_id);
}

// ---- setup: key, workflows, runs -----------------------------------------------------------

function askForKey() {
  ui.keyForm.hidden = false;
  ui.keyInfo.hidden = true;
  ui.picker.hidden = true;
  ui.keyInput.focus();
  describeRun();
}

/** @param {string} key */
function maskKey(key) {
  return key.length <= 10 ? '•'.repeat(key.length) : `${key.slice(0, 4)}…${key.slice(-4)}`;
}

async function loadWorkflows() {
  ui.select.replaceChildren();
  if (FIXED_WORKFLOW) {
    const wf = await getJson(`/workflows/${encodeURIComponent(FIXED_WORKFLOW)}`);
    ui.select.hidden = true;
    const label = ui.picker.querySelector('label');
    if (label) label.hidden = true;
    ui.fixed.hidden = false;
    ui.fixed.replaceChildren('Workflow: ', h('strong', { text: `${wf.name} (${wf.id})` }));
    return;
  }
  /** @type {{id: string, name: string}[]} */
  const items = [];
  let cursor = '';
  for (let page = 0; page < 20; page++) {
    const data = await getJson(`/workflows?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    items.push(...data.items);
    if (!data.next_cursor) break;
    cursor = data.next_cursor;
  }
  if (items.length === 0) {
    ui.select.append(h('option', { value: '', text: 'No workflows for this key' }));
    state.workflowId = null;
    return;
  }
  for (const wf of items) ui.select.append(h('option', { value: wf.id, text: `${wf.name} (${wf.id})` }));
  if (!state.workflowId || !items.some((w) => w.id === state.workflowId)) state.workflowId = items[0]?.id ?? null;
  ui.select.value = state.workflowId ?? '';
}

/** With a key: the workflows, then the run of the URL if there is one. @param {string | null} runId */
async function connect(runId) {
  const key = keyStore.get();
  if (!key) {
    askForKey();
    return;
  }
  ui.keyForm.hidden = true;
  ui.keyInfo.hidden = false;
  ui.keyMasked.textContent = maskKey(key);
  setStatus('Loading workflows…', true);
  try {
    await loadWorkflows();
  } catch (error) {
    const failure = asFailure(error);
    if (failure.body.code === 'unauthorized') {
      showAlert('The server refused the API key (unknown or revoked). Enter a valid key.');
      askForKey();
    } else if (failure.body.code === 'not_found') {
      showAlert(`The workflow "${FIXED_WORKFLOW}" does not exist, or this key may not use it.`);
      ui.picker.hidden = false;
    } else {
      await explain(failure);
    }
    describeRun();
    return;
  }
  clearAlert();
  ui.picker.hidden = false;
  if (runId) await reloadRun(runId);
  describeRun();
  if (!state.formEntry) ui.input.focus();
}

function newRun() {
  state.run = null;
  state.shownTurn = 0;
  closeForm();
  ui.transcript.replaceChildren();
  ui.timeline.replaceChildren();
  clearAlert();
  ui.input.disabled = false;
  describeRun();
  syncUrl();
  ui.input.focus();
}

// ---- wiring --------------------------------------------------------------------------------

ui.keyForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const key = ui.keyInput.value.trim();
  if (!key) return;
  keyStore.set(key);
  ui.keyInput.value = '';
  clearAlert();
  void connect(state.run?.runId ?? new URL(location.href).searchParams.get('run'));
});

ui.keyChange.addEventListener('click', () => {
  keyStore.clear();
  askForKey();
});

ui.select.addEventListener('change', () => {
  state.workflowId = ui.select.value || null;
  newRun();
});

ui.newRun.addEventListener('click', () => newRun());

ui.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    ui.composer.requestSubmit();
  }
});

ui.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  if (state.busy) return;
  if (!keyStore.get()) {
    askForKey();
    return;
  }
  if (!state.workflowId) {
    showAlert('Pick a workflow first.');
    return;
  }
  const query = ui.input.value.trim();
  if (query === '' && state.run) return; // an empty message to a started run says nothing
  ui.input.value = '';
  const entry = query ? userBubble(query) : null;
  void runTurn(query ? { query } : {}, entry).then(() => {
    if (!state.formEntry && !ui.input.disabled) ui.input.focus();
  });
});

adoptKeyFromUrl();
{
  const params = new URL(location.href).searchParams;
  if (!FIXED_WORKFLOW && params.get('workflow')) state.workflowId = params.get('workflow');
  void connect(params.get('run'));
}
