/**
 * The turn response: what the native API answers and what a turn record keeps. Message deltas
 * are merged (one `message` event per message with its whole content), so stored events do not
 * grow with the number of chunks the model sent.
 */
import type { CallRecord, CanvasEvent, FieldView, RunStatus, TurnUsage } from '../canvas';
import { ECHO_MODEL_ID } from '../llm/echo';
import type { FormLinkEmailStatus } from './form-link-mail';

/** What the run waits for: the form's component, its tips and the fields still needed. */
export interface NextInputHint {
  component_id: string;
  tips: string;
  inputs: Record<string, FieldView>;
}

/**
 * What a committed turn's `status` says: the run's status after it, or one of the turns that
 * leave the run's state as it was (lib/turns/unapplied.ts): `rolled_back` (a newer input
 * discarded it, on_busy `rollback`) and `rejected` (a queued input that no longer fitted the run).
 */
export type TurnStatus = RunStatus | 'rolled_back' | 'rejected';

/** The native API's execute response; stored as it was first returned. */
export interface TurnResponse {
  run_id: string;
  workflow_id: string;
  version: number;
  status: TurnStatus;
  turn_number: number;
  is_waiting_for_input: boolean;
  /** The turn ended a pass of the workflow (finished, failed, cancelled, interrupted or aborted). */
  is_completed: boolean;
  /** The run accepts no further turn. */
  is_terminal: boolean;
  error: { code: string; message: string; component_id?: string } | null;
  next_input_hint: NextInputHint | null;
  /** Easel runs no companion threads. */
  has_active_companions: false;
  /** Timers or async turns pending for the run. */
  has_background_work: boolean;
  outputs: Record<string, unknown> | null;
  usage: TurnUsage;
  events: CanvasEvent[];
  created_at: string;
  /**
   * Present when a stand-in answered in place of a model this turn (the `echo` model, the
   * default when none is configured): which, for which components, and what that means.
   */
  stand_in?: StandIn;
  /** Present when something sent was not used (`TurnNotice`). */
  notice?: TurnNotice;
  /**
   * Present when the form the run paused at asks for its link to be e-mailed
   * (UserFillUp `form_link_email`): sent once the turn committed, or why not.
   */
  form_link_email?: FormLinkEmailStatus;
  /**
   * A `rolled_back` turn: the calls outside the run it had made before it was discarded, from
   * its call records — they happened and are not undone (the records themselves are the turn's `calls`).
   */
  side_effects?: SideEffect[];
}

/** One call a discarded turn had made (a call record without its request and result). */
export interface SideEffect {
  component_id: string;
  kind: string;
  name?: string;
  ordinal: number;
  path: string[];
  status: 'ok' | 'error';
}

/**
 * Something the client sent that this turn did not use, said beside the answer. Present only
 * when there is one (stored with the turn, so a replay says it again).
 */
export interface TurnNotice {
  /** `query_not_used`: text sent to a run waiting for a form answered none of its fields. */
  code: 'query_not_used';
  message: string;
}

export const QUERY_NOT_USED_MESSAGE = 'the run is waiting for a form: the text sent was recorded (conversation history, sys.query) but answers none of its fields, so the form is asked again; send the form\'s values as inputs';

/**
 * The notice for text sent to a waiting run with no values for its form (DESIGN §7: the query
 * is recorded and the form asked again): the turn started waiting, it carried a query and no
 * input values, and it ends waiting.
 */
export function queryNotice(before: string, input: { query?: string | null; inputs?: Record<string, unknown> | null } | undefined, after: RunStatus): TurnNotice | undefined {
  if (before !== 'waiting_for_input' || after !== 'waiting_for_input') return undefined;
  if (typeof input?.query !== 'string' || input.query.trim() === '') return undefined;
  if (input.inputs && Object.keys(input.inputs).length > 0) return undefined;
  return { code: 'query_not_used', message: QUERY_NOT_USED_MESSAGE };
}

export interface StandIn {
  model: 'echo';
  component_ids: string[];
  notice: string;
}

export const ECHO_STAND_IN_NOTICE = 'the echo stand-in answered in place of a language model: it repeats its prompt, so these answers, classifications and tool calls are not a model\'s. Configure a model (EASEL_LLM_BASE_URL and EASEL_LLM_DEFAULT_MODEL) for real answers.';

/** The stand-in that answered model calls of this turn, from its call records; undefined when none did. */
export function standInOf(records: readonly CallRecord[]): StandIn | undefined {
  const ids = [...new Set(records.filter((r) => r.kind === 'model' && r.name === ECHO_MODEL_ID).map((r) => r.component_id))];
  return ids.length > 0 ? { model: 'echo', component_ids: ids, notice: ECHO_STAND_IN_NOTICE } : undefined;
}

export function mergeMessageDeltas(events: readonly CanvasEvent[]): CanvasEvent[] {
  const out: CanvasEvent[] = [];
  let open: { event: 'message'; data: { content: string } } | undefined;
  for (const e of events) {
    if (e.event === 'message') {
      if (open) open.data.content += e.data.content;
      else {
        open = { event: 'message', data: { ...e.data } };
        out.push(open);
      }
      continue;
    }
    open = undefined;
    out.push(e);
  }
  return out;
}

export function buildResponse(args: {
  runId: string;
  workflowId: string;
  version: number;
  status: RunStatus;
  turn: number;
  terminal: boolean;
  /** The forms the run waits for, when it does. */
  waitingFor: readonly string[];
  /** A form timer is armed while the run waits. */
  timerArmed: boolean;
  events: readonly CanvasEvent[];
  usage: TurnUsage;
  createdAt: string;
  standIn?: StandIn;
  notice?: TurnNotice;
  formLinkEmail?: FormLinkEmailStatus;
}): TurnResponse {
  const end = args.events.at(-1);
  return {
    run_id: args.runId,
    workflow_id: args.workflowId,
    version: args.version,
    status: args.status,
    turn_number: args.turn,
    is_waiting_for_input: args.status === 'waiting_for_input',
    is_completed: COMPLETED.has(args.status),
    is_terminal: args.terminal,
    error: end?.event === 'workflow_failed' ? end.data.error : null,
    next_input_hint:
      end?.event === 'user_inputs'
        ? { component_id: args.waitingFor[0] ?? '', tips: end.data.tips, inputs: end.data.inputs }
        : null,
    has_active_companions: false,
    has_background_work: args.timerArmed,
    outputs: end?.event === 'workflow_finished' ? end.data.outputs : null,
    usage: args.usage,
    events: mergeMessageDeltas(args.events),
    created_at: args.createdAt,
    ...(args.standIn ? { stand_in: args.standIn } : {}),
    ...(args.notice ? { notice: args.notice } : {}),
    ...(args.formLinkEmail ? { form_link_email: args.formLinkEmail } : {}),
  };
}

const COMPLETED = new Set<RunStatus>(['completed', 'failed', 'cancelled', 'aborted_looping_risk', 'interrupted']);
