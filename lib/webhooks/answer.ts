/**
 * What a webhook delivery is answered, by Begin's `execution_mode`:
 *
 * - `Immediately` (Accepted): at once, before the run — which goes to the turn queue. Status
 *   `response.status`, else 202; body `response.body_template` (it may show Begin's outputs,
 *   the delivery itself), else `{run_id, turn_number, status: "running"}`.
 * - `Streaming` (Final): once the turn ends. Status `response.status`, else the last
 *   `message_end`'s `status`, else 200; body `response.body_template` with references to the
 *   run's outputs (`{Agent:Writer@content}`), else RAGFlow's `{message, success, code}` (the
 *   messages shown, joined) with `run_id` and `status`. A run that failed, was cancelled or
 *   aborted is 422 `workflow_failed`.
 *
 * A template that is JSON answers `application/json`: a string that is exactly one reference
 * takes the value as it is, others are interpolated as text. Any other template answers
 * `text/plain`. Every answer carries `Easel-Run-Id` and `Location` (the run). Answers are
 * functions of the committed turn, so a replayed delivery gets the same one.
 */
import type { CanvasEvent } from '../canvas';
import { exactReference, getPath, isRecord, type Reference, splitTemplate, valueToText } from '../canvas/references';
import type { WebhookConfig } from '../components/webhook-params';
import { EaselError } from '../errors';
import type { TurnResponse } from '../turns/response';

export interface WebhookAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A Streaming webhook's run ended without completing. */
export class WorkflowFailedError extends EaselError {
  constructor(
    readonly runId: string,
    readonly status: string,
    readonly error: TurnResponse['error'],
  ) {
    super('workflow_failed', error?.message ?? `the run ended ${status}`);
  }
}

const runHeaders = (runId: string) => ({ 'easel-run-id': runId, location: `/workflows/v1/workflow-runs/${runId}` });

export function acceptedAnswer(config: WebhookConfig, beginId: string, payload: Record<string, unknown>, run: { runId: string; turn: number }): WebhookAnswer {
  const template = config.response.body_template;
  const status = config.response.status ?? 202;
  if (template) {
    const rendered = renderTemplate(template, outputsLookup(new Map([[beginId, payload]])));
    return { status, headers: { 'content-type': rendered.contentType, ...runHeaders(run.runId) }, body: rendered.body };
  }
  return { status, headers: { 'content-type': 'application/json', ...runHeaders(run.runId) }, body: JSON.stringify({ run_id: run.runId, turn_number: run.turn, status: 'running' }) };
}

export function finalAnswer(config: WebhookConfig, response: TurnResponse): WebhookAnswer {
  if (response.status === 'failed' || response.status === 'cancelled' || response.status === 'aborted_looping_risk') {
    throw new WorkflowFailedError(response.run_id, response.status, response.error);
  }
  const events = response.events;
  const template = config.response.body_template;
  const status = config.response.status ?? messageStatus(events) ?? 200;
  const headers = runHeaders(response.run_id);
  if (template) {
    const rendered = renderTemplate(template, outputsLookup(outputsOf(events)));
    return { status, headers: { 'content-type': rendered.contentType, ...headers }, body: rendered.body };
  }
  const message = events.filter((e) => e.event === 'message').map((e) => (e.data as { content: string }).content).join('');
  const body = { message, success: true, code: status, run_id: response.run_id, status: response.status };
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) };
}

/** The outputs each component finished with in the turn (its last `node_finished`). */
function outputsOf(events: readonly CanvasEvent[]): Map<string, Record<string, unknown>> {
  const outputs = new Map<string, Record<string, unknown>>();
  for (const e of events) if (e.event === 'node_finished') outputs.set(e.data.component_id, e.data.outputs);
  return outputs;
}

/** RAGFlow reads the answer's status from `message_end` (a Message may set it). */
function messageStatus(events: readonly CanvasEvent[]): number | undefined {
  let status: number | undefined;
  for (const e of events) {
    if (e.event !== 'message_end') continue;
    const s = Number((e.data as { status?: unknown }).status);
    if (Number.isInteger(s) && s >= 200 && s <= 599) status = s;
  }
  return status;
}

function outputsLookup(outputs: ReadonlyMap<string, Record<string, unknown>>): (ref: Reference) => unknown {
  return (ref) => {
    if (ref.kind !== 'component') return undefined;
    const of = outputs.get(ref.componentId);
    return of && Object.hasOwn(of, ref.output) ? getPath(of[ref.output], ref.path) : undefined;
  };
}

/** A body template rendered: JSON when the template is, else text. */
export function renderTemplate(template: string, lookup: (ref: Reference) => unknown): { body: string; contentType: string } {
  const text = (s: string) => splitTemplate(s).map((p) => ('text' in p ? p.text : valueToText(lookup(p.ref)))).join('');
  let parsed: unknown;
  try {
    parsed = JSON.parse(template);
  } catch {
    return { body: text(template), contentType: 'text/plain; charset=utf-8' };
  }
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const ref = exactReference(v);
      return ref ? (lookup(ref) ?? null) : text(v);
    }
    if (Array.isArray(v)) return v.map(walk);
    if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return { body: JSON.stringify(walk(parsed)), contentType: 'application/json' };
}
