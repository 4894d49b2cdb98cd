/**
 * Tool-call approvals of an Agent (Easel's addition, the Agent param `approval`: `"all"`, the
 * names of the tools that need one (as the model sees them, as the tools or their entries name
 * them), or per tool `true` or conditions on its arguments, e.g.
 * `{"send_email": true, "refund": {"amount": {"gt": 100}}}`).
 * Before such a call runs, the run pauses at the Agent (a PauseRequest) with the tool, its
 * arguments and what the model said that round; the answer approves it (the arguments may be
 * edited), or rejects it with a reason the model is told as the call's result.
 *
 * The next turn runs the Agent again: its model rounds and tool calls up to the pause are
 * answered from the records kept with the pause, so none is made twice, and the decision is
 * recorded as a call of its own (`{approval: <the call>}`), so a later pause of the same
 * invocation replays it rather than asking again.
 */
import { z } from 'zod';
import { requestHash } from '../canvas/calls';
import type { ComponentContext } from '../canvas/component';
import { PauseRequest } from '../canvas/errors';
import type { FormField } from '../canvas/forms';
import { isRecord } from '../canvas/references';
import { decisionField } from './form-fields';

/**
 * A condition on one argument of a call: every test given must hold. `matches` is a regular
 * expression the argument's text must match; the number tests take numbers (or numeric text).
 */
const argumentCondition = z.lazy(() => z
  .strictObject({
    equals: z.unknown().optional(),
    in: z.array(z.unknown()).max(100).optional(),
    matches: z
      .string()
      .max(500)
      .refine((r) => {
        try {
          new RegExp(r, 'u');
          return true;
        } catch {
          return false;
        }
      }, 'must be a valid regular expression')
      .optional(),
    gt: z.number().optional(),
    gte: z.number().optional(),
    lt: z.number().optional(),
    lte: z.number().optional(),
  })
  .refine((c) => Object.keys(c).length > 0, 'needs at least one test (equals, in, matches, gt, gte, lt, lte)'));

/** Per tool: `true` (every call), or conditions on its arguments, all of which make a call need approval. */
const perTool = z.lazy(() => z.record(z.string().min(1).max(128), z.union([z.literal(true), z.record(z.string().min(1).max(128), argumentCondition)])));

export const approvalParam = z.lazy(() => z
  .union([z.literal('all'), z.array(z.string().min(1).max(128)).max(64), perTool])
  .nullish()
  .transform((v) => v ?? null));

export type ApprovalParam = z.output<typeof approvalParam>;
type ArgumentCondition = z.output<typeof argumentCondition>;

export type Decision = { decision: 'approve'; arguments: Record<string, unknown> | null; reason: string | null } | { decision: 'reject'; reason: string | null };

/** What the pause keeps to know, when answered, which call it asked about. */
interface PendingApproval {
  tool: string;
  request_hash: string;
  ordinal: number;
  path: number[];
}

/** The call about to be made, as `decide` needs it. */
export interface GatedCall {
  /** The name the model called it by (`<name>_<index>`). */
  name: string;
  /** The tool's own name. */
  toolName: string;
  args: Record<string, unknown>;
  /** The call's request as the Agent records it. */
  request: unknown;
  ordinal: number;
  path: readonly number[];
  /** What the model said in the round that made the call. */
  said: string;
  /** The tool's JSON Schema of its arguments: an edit must fit it. */
  parameters: Record<string, unknown>;
}

/**
 * Whether `approval` covers the call: named by the name the model calls it, the tool's name or
 * its entry's; with conditions, when its arguments meet all of them.
 */
export function needsApproval(approval: ApprovalParam, call: { name: string; toolName: string; entryName: string; args: Record<string, unknown> }): boolean {
  if (approval === null) return false;
  if (approval === 'all') return true;
  const names = [call.name, call.toolName, call.entryName];
  if (Array.isArray(approval)) return names.some((n) => approval.includes(n));
  const rule = names.map((n) => approval[n]).find((r) => r !== undefined);
  if (rule === undefined) return false;
  if (rule === true) return true;
  return Object.entries(rule).every(([argument, condition]) => meets(call.args[argument], condition));
}

function meets(value: unknown, c: ArgumentCondition): boolean {
  if (c.equals !== undefined && JSON.stringify(value) !== JSON.stringify(c.equals)) return false;
  if (c.in !== undefined && !c.in.some((x) => JSON.stringify(x) === JSON.stringify(value))) return false;
  if (c.matches !== undefined && !((typeof value === 'string' || typeof value === 'number') && new RegExp(c.matches, 'u').test(String(value)))) return false;
  const bounds = [c.gt, c.gte, c.lt, c.lte].some((b) => b !== undefined);
  if (bounds) {
    const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN;
    if (!Number.isFinite(n)) return false;
    if ((c.gt !== undefined && !(n > c.gt)) || (c.gte !== undefined && !(n >= c.gte)) || (c.lt !== undefined && !(n < c.lt)) || (c.lte !== undefined && !(n <= c.lte))) return false;
  }
  return true;
}

/**
 * The person's decision on this call: from the turn's records when an earlier run of this
 * invocation had it, else from the answer to the pause that asked about this very call;
 * neither, the run pauses here to ask.
 */
export async function decide(ctx: ComponentContext, call: GatedCall): Promise<Decision> {
  const asked = { approval: call.request };
  const recorded = ctx.recordedCall({ kind: 'tool', name: call.name, request: asked });
  if (recorded?.record.status === 'ok' && isDecision(recorded.record.result)) {
    ctx.recordCall({ kind: 'tool', name: call.name, request: asked, result: recorded.record.result, replayed: true });
    return recorded.record.result;
  }
  const pending: PendingApproval = { tool: call.name, request_hash: requestHash(asked), ordinal: call.ordinal, path: [...call.path] };
  const resumed = isRecord(ctx.resumed?.data) ? (ctx.resumed.data.approval as PendingApproval | undefined) : undefined;
  if (resumed && sameCall(resumed, pending)) {
    const decision = decisionOf(ctx.formValues);
    ctx.recordCall({ kind: 'tool', name: call.name, request: asked, result: decision });
    await ctx.callCompleted();
    return decision;
  }
  throw new PauseRequest(approvalFields(call.args, call.parameters), approvalTips(call), { approval: pending });
}

/** What the model is told of a rejected call. */
export function rejection(decision: Decision): string {
  return `The user rejected this tool call${decision.reason ? `: ${decision.reason}` : '.'} Do not make it again; go on without it.`;
}

function approvalFields(args: Record<string, unknown>, parameters: Record<string, unknown>): FormField[] {
  return [
    decisionField('decision', [
      { id: 'approve', label: 'Approve' },
      { id: 'reject', label: 'Reject' },
    ]),
    { key: 'arguments', name: 'Arguments', type: 'object', optional: true, description: "The call is made with these; edit them before approving (an edit must fit the tool's parameters).", schema: parameters, value: args },
    { key: 'reason', name: 'Reason', type: 'line', optional: true, description: 'Told to the model when the call is rejected.', value: null },
  ];
}

function approvalTips(call: GatedCall): string {
  const said = call.said.trim();
  return [`The agent wants to call ${call.toolName} with ${JSON.stringify(call.args)}. Approve or reject this call.`, ...(said ? [`It said: ${said}`] : [])].join('\n\n');
}

function decisionOf(values: Readonly<Record<string, unknown>>): Decision {
  const reason = typeof values.reason === 'string' && values.reason.trim() !== '' ? values.reason.trim() : null;
  if (values.decision !== 'approve') return { decision: 'reject', reason };
  return { decision: 'approve', arguments: isRecord(values.arguments) ? values.arguments : null, reason };
}

function isDecision(value: unknown): value is Decision {
  return isRecord(value) && (value.decision === 'approve' || value.decision === 'reject');
}

function sameCall(a: PendingApproval, b: PendingApproval): boolean {
  return a.tool === b.tool && a.request_hash === b.request_hash && a.ordinal === b.ordinal && a.path.join('/') === b.path.join('/');
}
