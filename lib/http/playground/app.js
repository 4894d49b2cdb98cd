// @ts-check
/**
 * The Easel playground: hand-written ES modules, no framework. It talks to the native API of
 * the server that served it (api.js) with the key the user entered. A turn is POSTed with
 * `Accept: text/event-stream`: `message` deltas stream into the transcript as markdown
 * (transcript.js, markdown.js), every event goes to the timeline, and `turn_response` (the
 * committed body) or `turn_error` (nothing committed) ends it. A pause is rendered as a real
 * form. Between turns the run is read again with backoff (live.js), so a turn committed
 * elsewhere — a form's timer, another tab, a queued turn — shows up, and the form it
 * overtook becomes read-only; a timer's deadline is counted down. The side panel lists the
 * workflow's runs the key may reopen (run-list.js); on a phone it folds away behind a button.
 *
 * URL: /playground (pick a workflow), /playground/{workflow_id} (that one only; for iframes),
 * `?run=<run_id>` reopens a run, `?key=<key>` and `user_token` are taken once (api.js).
 *
 * Type-checked with lib/http/playground/tsconfig.json (test/playground/routes.test.ts).
 */

/** @typedef {import('./fields.js').Field} Field */
/** @typedef {import('./api.js').EngineEvent} EngineEvent */
/** @typedef {import('./api.js').ApiErrorBody} ApiErrorBody */
/** @typedef {import('./form-view.js').Hint} Hint */
/**
 * What a turn's response and a run's description have in common (`timer_due_at`: the description only).
 * @typedef {{run_id: string, workflow_id?: string, status: string, turn_number: number, is_terminal?: boolean, turn_in_progress?: number | null, next_input_hint: Hint | null, has_background_work?: boolean, timer_due_at?: string | null, stand_in?: {model: string, component_ids: string[], notice: string}}} RunState
 */
/** @typedef {{turn_number: number, request?: {command?: string | null, run_input?: {query?: string, inputs?: Record<string, unknown>, command?: string}}, response: {events?: EngineEvent[], status?: string, turn_number?: number}}} StoredTurn */
/** @typedef {{runId: string, turnNumber: number, status: string, isTerminal: boolean, hint: Hint | null, timerDueAt: number | null}} Run */

import { adoptCredentialsFromUrl, ApiFailure, asFailure, call, FIXED_WORKFLOW, getJson, keyStore, readPrologue, readSse, userTokenStore } from './api.js';
import { display, h } from './fields.js';
import { FormView } from './form-view.js';
import { Poller, remaining } from './live.js';
import { listRuns, renderRunList, updateRunRow } from './run-list.js';
import { Transcript, TurnView } from './transcript.js';

// ---- the page ------------------------------------------------------------------------------

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
  panelToggle: byId('panel-toggle', HTMLButtonElement),
  panelClose: byId('panel-close', HTMLButtonElement),
  side: byId('side', HTMLElement),
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
  factTimerLabel: byId('fact-timer-label', HTMLElement),
  factTimer: byId('fact-timer', HTMLElement),
  factLive: byId('fact-live', HTMLElement),
  runs: byId('runs', HTMLOListElement),
  runsNote: byId('runs-note', HTMLElement),
  runsRefresh: byId('runs-refresh', HTMLButtonElement),
  timeline: byId('timeline', HTMLOListElement),
};

const transcript = new Transcript(ui.transcript, ui.timeline);

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

// ---- state ---------------------------------------------------------------------------------

const state = {
  /** @type {string | null} */
  workflowId: FIXED_WORKFLOW,
  /** @type {Run | null} */
  run: null,
  busy: false,
  /** The last turn whose messages are on screen. */
  shownTurn: 0,
  /** @type {FormView | null} the open form */
  form: null,
  /** The armed timer's time was seen to pass: the run is read again soon. */
  dueNoticed: false,
  /** @type {Map<string, Promise<string>>} each workflow's prologue ('' when none or unknown) */
  prologues: new Map(),
};

/** @param {boolean} busy @param {string} [label] */
function setBusy(busy, label = '') {
  state.busy = busy;
  ui.newRun.disabled = busy;
  ui.select.disabled = busy;
  ui.send.textContent = busy ? 'Running…' : 'Send';
  ui.transcript.setAttribute('aria-busy', String(busy));
  state.form?.setBusy(busy);
  if (busy) {
    poller.schedule(); // no read while a turn of ours runs
    setStatus(label, true);
  } else {
    describeRun();
    poller.schedule();
  }
  ui.send.disabled = busy || Boolean(state.run?.isTerminal);
}

const STATUS_TEXT = /** @type {Record<string, string>} */ ({
  not_started: 'not started',
  running: 'a turn is running',
  waiting_for_input: 'waiting for your answers',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
  aborted_looping_risk: 'aborted (loop safety)',
  interrupted: 'interrupted by a newer message',
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
  tickCountdown();
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
  const due = s.timer_due_at ? Date.parse(s.timer_due_at) : null;
  state.run = { runId: s.run_id, turnNumber: s.turn_number, status: s.status, isTerminal: Boolean(s.is_terminal), hint: s.next_input_hint ?? null, timerDueAt: due };
  state.dueNoticed = false;
  closeForm();
  if (s.status === 'waiting_for_input' && s.next_input_hint) renderForm(s.next_input_hint, state.run);
  describeRun();
  syncUrl();
  updateRunRow(ui.runs, state.run);
  // a turn's response says a timer is armed, not when it fires: the run's description does
  if (s.has_background_work && s.timer_due_at === undefined) poller.now();
  else poller.reset();
}

// ---- live updates: the run read again while the page is open ---------------------------------

const poller = new Poller(pollRun, () => {
  if (!state.run || !keyStore.get()) return '–';
  if (!ui.keyForm.hidden) return 'waiting for a valid key';
  if (state.run.isTerminal) return 'off: the run has ended';
  if (state.busy) return 'a turn of this page is running';
  return null;
}, (text) => {
  ui.factLive.textContent = text;
});

/** Reads the run; catches up when it moved. @returns {Promise<boolean>} whether it moved */
async function pollRun() {
  const run = state.run;
  if (!run) return false;
  /** @type {RunState} */
  let current;
  try {
    current = await getJson(`/workflow-runs/${encodeURIComponent(run.runId)}`);
  } catch (error) {
    const failure = asFailure(error);
    if (state.run !== run) return false;
    if (failure.body.code === 'not_found') {
      // deleted or expired: there is nothing more to read
      run.isTerminal = true;
      transcript.note('This run no longer exists (deleted, or expired after a long idle time).', 'error');
      describeRun();
    } else if (failure.body.code === 'unauthorized') {
      await explain(failure);
    }
    throw failure;
  }
  if (state.run !== run || state.busy) return false; // another run, or a turn of ours, since
  if (current.turn_number === run.turnNumber && current.status === run.status) {
    run.timerDueAt = current.timer_due_at ? Date.parse(current.timer_due_at) : null;
    tickCountdown();
    return false;
  }
  await reloadRun(run.runId, current);
  return true;
}

/** The armed timer's countdown, on the side panel and in the form. */
function tickCountdown() {
  const run = state.run;
  const due = run?.status === 'waiting_for_input' ? run.timerDueAt : null;
  ui.factTimerLabel.hidden = due === null;
  ui.factTimer.hidden = due === null;
  if (due === null) {
    state.form?.setCountdown(null);
    return;
  }
  const left = remaining(due, Date.now());
  ui.factTimer.textContent = left === 'now' ? 'due now' : `fires in ${left}`;
  state.form?.setCountdown(left === 'now' ? 'Time is up: the workflow goes on without an answer at its next check.' : `Time left to answer: ${left}`, left === 'now');
  if (left === 'now' && !state.dueNoticed) {
    state.dueNoticed = true;
    poller.reset();
  }
}
setInterval(tickCountdown, 1000);

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
  const view = new TurnView(transcript, turn, true);
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
      if (committed.stand_in) transcript.note(`Answered by the ${committed.stand_in.model} stand-in, not a language model (${committed.stand_in.component_ids.join(', ')}): ${committed.stand_in.notice}`, 'warn');
      state.busy = false;
      applyRunState(committed);
      if (committed.status === 'completed') transcript.note(`Completed (turn ${committed.turn_number}).`, 'done');
      if (!run) void refreshRunList();
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
    if (userEntry && failure.body.code !== 'invalid_inputs') transcript.markNotSent(userEntry, 'not sent');
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

/**
 * Catches up on the run: the turns not on screen (the open form, overtaken by one of them, is
 * kept read-only, saying what happened to it), then its current state and form.
 * @param {string | undefined} [runId] @param {RunState} [known] the run as just read
 */
async function reloadRun(runId = state.run?.runId, known) {
  if (!runId) return;
  try {
    const run = known ?? /** @type {RunState} */ (await getJson(`/workflow-runs/${encodeURIComponent(runId)}`));
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
        if (state.form) freezeForm(overtakenBy(t));
        showStoredTurn(t, asked);
        asked = [...(t.response.events ?? [])].reverse().find((e) => e.event === 'user_inputs')?.data?.inputs;
        state.shownTurn = t.turn_number;
      }
      if (!turns.next_cursor) break;
      cursor = turns.next_cursor;
    }
    if (run.status === 'running' && state.form) freezeForm('Answered elsewhere: that turn is running now.');
    applyRunState(run);
    if (run.status === 'running') transcript.note(`Turn ${run.turn_in_progress ?? run.turn_number + 1} is running elsewhere; it shows here when it ends.`);
  } catch (error) {
    const failure = asFailure(error);
    showAlert(`Could not reload the run: ${failure.body.error} (${failure.body.code}).`);
    if (failure.body.code === 'unauthorized') askForKey();
  }
}

/** What happened to a form that turn `t` overtook. @param {StoredTurn} t */
function overtakenBy(t) {
  const input = t.request?.run_input ?? {};
  const command = commandOf(t);
  if (command === 'timeout') return 'Timed out: no answer came in time, so the workflow went on without one.';
  if (command === 'stop') return 'Closed: the run was stopped.';
  if (input.inputs) return 'Answered elsewhere (another tab, client or form link).';
  return 'Closed: the run moved on.';
}

/** A stored turn's command (`stop`, a timer's `timeout`), kept beside its run input. @param {StoredTurn} t */
const commandOf = (t) => t.request?.command ?? t.request?.run_input?.command ?? null;

/**
 * A committed turn read back: what was sent, then its events. Answers are named by the labels
 * of the form they answered (`asked`, from the turn before), as they were when sent.
 * @param {StoredTurn} t @param {Record<string, Field>} [asked]
 */
function showStoredTurn(t, asked) {
  const input = t.request?.run_input ?? {};
  if (typeof input.query === 'string' && input.query !== '') transcript.user(input.query);
  if (input.inputs && typeof input.inputs === 'object') {
    const rows = Object.entries(input.inputs).map(([key, value]) => {
      const field = asked?.[key];
      const chosen = field?.decisions?.find((d) => d.id === value);
      return /** @type {[string, string]} */ ([field?.name || key, chosen ? chosen.label : display(value)]);
    });
    transcript.add(transcript.answers(rows));
  }
  const command = commandOf(t);
  if (command === 'stop') transcript.note('Stop requested.');
  if (command === 'timeout') transcript.note('The form timed out.');
  const view = new TurnView(transcript, t.turn_number, false);
  for (const e of t.response.events ?? []) view.onEvent(e.event, e.data);
  view.finish();
  view.timeline('turn_response', `${t.response.status ?? ''} · turn ${t.turn_number}`, 'end');
}

// ---- forms ---------------------------------------------------------------------------------

function closeForm() {
  state.form?.remove();
  state.form = null;
}

/** The open form, overtaken by a turn committed elsewhere: read-only, saying why. @param {string} why */
function freezeForm(why) {
  state.form?.freeze(why);
  state.form = null;
}

/** @param {Hint} hint @param {Run} run */
function renderForm(hint, run) {
  state.form = new FormView((entry) => transcript.add(entry), hint, run.turnNumber, {
    upload,
    busy: () => state.busy,
    answersEntry: (rows) => transcript.answers(rows),
    unreadable: async (error) => {
      const failure = asFailure(error);
      if (failure.body.code === 'unauthorized') await explain(failure);
      else showAlert(`Could not read the form: ${failure.body.error}`);
      setBusy(false);
    },
    send: async (inputs, _rows, answers) => {
      const outcome = await runTurn({ inputs }, answers);
      if (outcome.ok) return { sent: true };
      return { sent: false, ...(outcome.failure.body.code === 'invalid_inputs' ? { problems: outcome.failure.body.fields ?? [] } : {}) };
    },
  });
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

// ---- the prologue: what the workflow's Begin says first -----------------------------------

/**
 * A workflow's prologue, read once per page ('' when there is none or the key may not read it).
 * @param {string} workflowId @returns {Promise<string>}
 */
function prologueOf(workflowId) {
  let known = state.prologues.get(workflowId);
  if (!known) {
    known = readPrologue(workflowId);
    state.prologues.set(workflowId, known);
  }
  return known;
}

/** Puts the workflow's prologue first in the conversation. */
async function showPrologue() {
  const workflowId = state.workflowId;
  if (!workflowId) return;
  const text = await prologueOf(workflowId);
  if (!text || state.workflowId !== workflowId || ui.transcript.querySelector('.prologue')) return;
  transcript.prologue(text);
}

// ---- the run list ----------------------------------------------------------------------------

let listing = 0;
async function refreshRunList() {
  const workflowId = state.workflowId;
  if (!workflowId || !keyStore.get()) {
    ui.runs.replaceChildren();
    ui.runsNote.textContent = '';
    return;
  }
  const ticket = ++listing;
  ui.runsRefresh.disabled = true;
  try {
    const runs = await listRuns(workflowId);
    if (ticket !== listing) return;
    renderRunList(ui.runs, runs, state.run?.runId ?? null, (runId) => void openRun(runId));
    const whose = runs.source === 'listing' ? (userTokenStore.get() ? "This user's runs" : 'Runs of this workflow') : 'Runs started in this browser';
    ui.runsNote.textContent = runs.rows.length === 0 ? `${whose}: none yet.` : `${whose}, newest first.`;
  } catch (error) {
    if (ticket === listing) ui.runsNote.textContent = `Could not list the runs: ${asFailure(error).body.error}`;
  } finally {
    if (ticket === listing) ui.runsRefresh.disabled = false;
  }
}

/** Shows another run from its start: its turns, its form. @param {string} runId */
async function openRun(runId) {
  if (state.busy) return;
  resetView();
  setPanel(false);
  void showPrologue();
  await reloadRun(runId);
}

// ---- the side panel: beside the conversation, or folded away on a narrow screen --------------

/** @param {boolean} open */
function setPanel(open) {
  const was = document.body.classList.contains('panel-open');
  document.body.classList.toggle('panel-open', open);
  ui.panelToggle.setAttribute('aria-expanded', String(open));
  if (open && !was) ui.panelClose.focus();
  else if (!open && was) ui.panelToggle.focus();
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
  void showPrologue();
  if (runId) await reloadRun(runId);
  describeRun();
  void refreshRunList();
  if (!state.form) ui.input.focus();
}

/** An empty conversation: no run shown. */
function resetView() {
  state.run = null;
  state.shownTurn = 0;
  closeForm();
  transcript.clear();
  clearAlert();
  poller.schedule();
  ui.input.disabled = false;
}

function newRun() {
  resetView();
  describeRun();
  syncUrl();
  updateRunRow(ui.runs, null);
  void showPrologue();
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
  state.prologues.clear();
  void connect(state.run?.runId ?? new URL(location.href).searchParams.get('run'));
});

ui.keyChange.addEventListener('click', () => {
  keyStore.clear();
  askForKey();
});

ui.select.addEventListener('change', () => {
  state.workflowId = ui.select.value || null;
  newRun();
  void refreshRunList();
});

ui.newRun.addEventListener('click', () => newRun());
ui.runsRefresh.addEventListener('click', () => void refreshRunList());
ui.panelToggle.addEventListener('click', () => setPanel(!document.body.classList.contains('panel-open')));
ui.panelClose.addEventListener('click', () => setPanel(false));
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && document.body.classList.contains('panel-open')) setPanel(false);
});

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
  const entry = query ? transcript.user(query) : null;
  void runTurn(query ? { query } : {}, entry).then(() => {
    if (!state.form && !ui.input.disabled) ui.input.focus();
  });
});

adoptCredentialsFromUrl();
{
  const params = new URL(location.href).searchParams;
  if (!FIXED_WORKFLOW && params.get('workflow')) state.workflowId = params.get('workflow');
  void connect(params.get('run'));
}
