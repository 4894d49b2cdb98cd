// @ts-check
/**
 * The runs of a workflow the page may reopen (docs/access.md): with an admin key, or with an
 * end-user token, the API's listing (`GET /workflow-runs?workflow_id=`, the user's runs only
 * for a token); with a bare public key, which may list nothing, the runs whose tokens this
 * browser holds, each read with its token.
 */

import { ApiFailure, getJson, keyStore, runTokens, userTokenStore } from './api.js';
import { h } from './fields.js';

/** @typedef {{runId: string, status: string, turnNumber: number, createdAt: string}} RunRow */
/** @typedef {{rows: RunRow[], source: 'listing' | 'held'}} RunList */

/** Runs shown, newest first. */
export const RUN_LIST_LIMIT = 20;

/** The credentials the listing refused (403): they are not asked again. */
let refused = '';

/** @param {any} run @returns {RunRow} */
const rowOf = (run) => ({ runId: String(run.run_id), status: String(run.status), turnNumber: Number(run.turn_number), createdAt: String(run.created_at ?? '') });

/** @param {string} workflowId @returns {Promise<RunList>} */
export async function listRuns(workflowId) {
  const credentials = `${keyStore.get() ?? ''} ${userTokenStore.get() ?? ''}`;
  if (refused !== credentials) {
    try {
      const page = await getJson(`/workflow-runs?workflow_id=${encodeURIComponent(workflowId)}&limit=${RUN_LIST_LIMIT}`);
      return { rows: (/** @type {unknown[]} */ (page.items)).map(rowOf), source: 'listing' };
    } catch (error) {
      if (!(error instanceof ApiFailure) || error.body.code !== 'forbidden') throw error;
      refused = credentials;
    }
  }
  const held = Object.entries(runTokens.all())
    .filter(([, run]) => run.workflowId === workflowId || run.workflowId === null)
    .sort(([, a], [, b]) => b.at - a.at)
    .slice(0, RUN_LIST_LIMIT);
  const rows = await Promise.all(held.map(async ([runId, run]) => {
    try {
      const read = await getJson(`/workflow-runs/${runId}`);
      if (run.workflowId === null) runTokens.remember(run.token, String(read.workflow_id));
      return read.workflow_id === workflowId ? rowOf(read) : null;
    } catch (error) {
      // deleted or expired: its token opens nothing any more
      if (error instanceof ApiFailure && error.body.code === 'not_found') runTokens.forget(runId);
      return null;
    }
  }));
  return { rows: rows.filter((r) => r !== null).sort((a, b) => b.createdAt.localeCompare(a.createdAt)), source: 'held' };
}

/** @param {string} iso */
function when(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? '' : date.toLocaleString([], { dateStyle: 'short', timeStyle: 'short' });
}

/**
 * The list's items: one button per run, the shown one marked current.
 * @param {HTMLOListElement} list @param {RunList} runs @param {string | null} current
 * @param {(runId: string) => void} open
 */
export function renderRunList(list, runs, current, open) {
  list.replaceChildren(...runs.rows.map((run) => {
    const button = h('button', { type: 'button', class: 'run-item', 'aria-current': run.runId === current ? 'true' : null, title: run.runId }, [
      h('span', { class: `badge badge-${run.status}`, text: run.status }),
      h('span', { class: 'run-turn', text: `turn ${run.turnNumber}` }),
      h('time', { class: 'run-when', datetime: run.createdAt, text: when(run.createdAt) }),
      h('code', { class: 'run-id', text: run.runId.slice(0, 8) }),
    ]);
    button.addEventListener('click', () => open(run.runId));
    return h('li', {}, [button]);
  }));
}

/**
 * The shown run's row after one of its turns: marked current, its status and turn brought up
 * to date without listing again. `null`: no run is shown.
 * @param {HTMLOListElement} list @param {{runId: string, status: string, turnNumber: number} | null} run
 */
export function updateRunRow(list, run) {
  for (const button of list.querySelectorAll('button.run-item')) {
    const current = run !== null && button.getAttribute('title') === run.runId;
    if (current) button.setAttribute('aria-current', 'true');
    else button.removeAttribute('aria-current');
    if (!current || !run) continue;
    const badge = button.querySelector('.badge');
    if (badge) {
      badge.textContent = run.status;
      badge.className = `badge badge-${run.status}`;
    }
    const turn = button.querySelector('.run-turn');
    if (turn) turn.textContent = `turn ${run.turnNumber}`;
  }
}
