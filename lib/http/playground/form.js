// @ts-check
/**
 * The hosted form page of a form link (`<base>/playground/form#<token>`): the form of one
 * pause, answered without any API key. The token stays in the URL's fragment, which browsers do
 * not send, and goes to the API in the `Easel-Form-Token` header only. The page shows the
 * pending form and nothing else of the run; once answered (here or elsewhere), the link says so.
 */

import { display, fieldControl, h } from './fields.js';

/** @typedef {import('./fields.js').Field} Field */
/** @typedef {{link_id: string, tips: string, inputs: Record<string, Field>, turn_number: number, expires_at: string}} PendingForm */

const prefix = /^(.*?)\/playground\/form\/?$/.exec(location.pathname)?.[1] ?? '';
const API = `${prefix}/workflows/v1/form-link`;
const token = decodeURIComponent(location.hash.slice(1));

const status = /** @type {HTMLElement} */ (document.getElementById('status-line'));
const alertBox = /** @type {HTMLElement} */ (document.getElementById('alert'));
const root = /** @type {HTMLElement} */ (document.getElementById('form-root'));

/** What each refusal means to the person holding the link. */
const REFUSALS = /** @type {Record<string, string>} */ ({
  not_found: 'This link is not valid. Check that you copied all of it.',
  form_link_expired: 'This link has expired. Ask whoever sent it for a new one.',
  form_link_used: 'This form has been answered already. There is nothing more to do here.',
});

/** @param {string} text @param {'error' | 'info'} [kind] */
function say(text, kind = 'error') {
  alertBox.textContent = text;
  alertBox.className = `alert alert-${kind}`;
  alertBox.hidden = false;
}

/** @param {Response} res @returns {Promise<{code: string, error: string, fields?: {field: string, message: string}[]}>} */
async function failure(res) {
  try {
    const body = await res.json();
    if (body && typeof body.code === 'string') return body;
  } catch {
    // not JSON
  }
  return { code: `http_${res.status}`, error: `the server answered ${res.status}` };
}

/** @param {RequestInit} [init] */
async function call(init = {}) {
  const headers = new Headers(init.headers);
  headers.set('easel-form-token', token);
  return fetch(API, { ...init, headers });
}

/** @param {PendingForm} pending */
function render(pending) {
  const controls = Object.entries(pending.inputs).map(([key, field]) => fieldControl('link', key, field, null));
  const decides = Object.values(pending.inputs).some((f) => f.decisions && f.decisions.length > 0);
  // as in the playground: with a decision, Enter submits through a hidden button that is ignored
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Send', hidden: decides, tabindex: decides ? -1 : undefined, 'aria-hidden': decides ? 'true' : undefined });
  const fieldset = h('fieldset', {}, [
    h('legend', { id: 'link-legend', text: 'Please answer' }),
    pending.tips ? h('p', { class: 'tips', text: pending.tips }) : null,
    decides ? submit : null,
    ...controls.map((c) => c.root),
    h('p', { class: 'form-actions' }, [decides ? null : submit, h('span', { class: 'note', text: `Fields marked * are required. This link works until ${new Date(pending.expires_at).toLocaleString()}.` })]),
  ]);
  const form = h('form', { class: 'form', 'aria-labelledby': 'link-legend' }, [fieldset]);
  root.replaceChildren(form);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (decides && !(e.submitter instanceof HTMLButtonElement && e.submitter.classList.contains('decision'))) return;
    void send(form, fieldset, controls);
  });
  controls[0]?.focusable.focus();
  status.textContent = 'Waiting for your answer';
}

/** @param {HTMLFormElement} form @param {HTMLFieldSetElement} fieldset @param {import('./fields.js').FieldControl[]} controls */
async function send(form, fieldset, controls) {
  for (const c of controls) c.showError(null);
  if (!form.reportValidity()) return;
  fieldset.disabled = true;
  status.textContent = 'Sending…';
  /** @type {Record<string, unknown>} */
  const inputs = {};
  /** @type {[string, string][]} */
  const rows = [];
  for (const c of controls) {
    const value = await c.read();
    if (value === undefined) continue;
    inputs[c.key] = value;
    rows.push([c.label, c.describe ? c.describe(value) : display(value)]);
  }
  /** @type {Response} */
  let res;
  try {
    res = await call({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ inputs }) });
  } catch {
    fieldset.disabled = false;
    status.textContent = 'Not sent';
    say('The server cannot be reached. Try again in a moment.');
    return;
  }
  if (res.ok) {
    const list = h('dl', { class: 'answers' });
    for (const [label, value] of rows) list.append(h('dt', { text: label }), h('dd', { text: value }));
    root.replaceChildren(h('p', { class: 'thanks', text: 'Thank you: your answer was sent.' }), list);
    status.textContent = 'Answered';
    return;
  }
  const body = await failure(res);
  if (body.code === 'invalid_inputs') {
    fieldset.disabled = false;
    status.textContent = 'Please check the form';
    for (const p of body.fields ?? []) controls.find((c) => c.key === p.field)?.showError(p.message);
    controls.find((c) => (body.fields ?? []).some((p) => p.field === c.key))?.focusable.focus();
    return;
  }
  root.replaceChildren();
  status.textContent = 'Not sent';
  say(REFUSALS[body.code] ?? `The answer could not be sent: ${body.error}`);
}

async function load() {
  if (!token) {
    status.textContent = 'No form';
    say(REFUSALS.not_found ?? '');
    return;
  }
  /** @type {Response} */
  let res;
  try {
    res = await call();
  } catch {
    status.textContent = 'Offline';
    say('The server cannot be reached. Reload the page to try again.');
    return;
  }
  if (!res.ok) {
    const body = await failure(res);
    status.textContent = 'No form';
    say(REFUSALS[body.code] ?? `The form cannot be shown: ${body.error}`);
    return;
  }
  render(/** @type {PendingForm} */ (await res.json()));
}

void load();
