/**
 * The turn response: what the native API answers and what a turn record keeps. Message deltas
 * are merged (one `message` event per message with its whole content), so stored events do not
 * grow with the number of chunks the model sent.
 */
import type { CanvasEvent, FieldView, RunStatus, TurnUsage } from '../canvas';

export interface NextInputHint {
  fields: Record<string, FieldView>;
  tips: string;
}

export interface TurnResponse {
  run_id: string;
  workflow_id: string;
  version: number;
  status: RunStatus;
  turn_number: number;
  /** The turn ended a pass of the workflow (finished, failed, cancelled or aborted). */
  is_completed: boolean;
  /** The run accepts no further turn. */
  is_terminal: boolean;
  outputs: Record<string, unknown> | null;
  next_input_hint: NextInputHint | null;
  error: { code: string; message: string; component_id?: string } | null;
  usage: TurnUsage;
  events: CanvasEvent[];
  created_at: string;
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
  events: readonly CanvasEvent[];
  usage: TurnUsage;
  createdAt: string;
}): TurnResponse {
  const end = args.events.at(-1);
  return {
    run_id: args.runId,
    workflow_id: args.workflowId,
    version: args.version,
    status: args.status,
    turn_number: args.turn,
    is_completed: ['completed', 'failed', 'cancelled', 'aborted_looping_risk'].includes(args.status),
    is_terminal: args.terminal,
    outputs: end?.event === 'workflow_finished' ? end.data.outputs : null,
    next_input_hint: end?.event === 'user_inputs' ? { fields: end.data.inputs, tips: end.data.tips } : null,
    error: end?.event === 'workflow_failed' ? end.data.error : null,
    usage: args.usage,
    events: mergeMessageDeltas(args.events),
    created_at: args.createdAt,
  };
}
