/**
 * Reading runs: their current state for GET /workflow-runs/{id}, their committed turns, and
 * deletion. Nothing here writes a turn.
 */
import type { FieldView, RunStatus } from '../canvas';
import { Canvas } from '../canvas';
import type { PendingPrompt } from '../canvas/state';
import { deleteSession } from '../store/deletion';
import { getTurn, listTurns, loadSession } from '../store/sessions';
import { compiledVersion, type TurnEngine } from './execute';
import type { NextInputHint } from './response';

export interface RunSummary {
  run_id: string;
  workflow_id: string;
  version: number;
  /** `running` while a turn is in flight. */
  status: RunStatus;
  /** The last committed turn. */
  turn_number: number;
  /** The turn being run, when one is. */
  turn_in_progress: number | null;
  /** Inputs queued behind the turn in flight (double-texting: docs/double-texting.md), each to become a turn of its own. */
  queued_turns: number;
  is_waiting_for_input: boolean;
  is_terminal: boolean;
  next_input_hint: NextInputHint | null;
  has_active_companions: false;
  has_background_work: boolean;
  /** When the armed form timer fires (ISO), if one is. */
  timer_due_at: string | null;
  user_id: string | null;
  /** The run and turn this run was forked from; null for a run that was started. */
  forked_from: { run_id: string; turn_number: number } | null;
  created_at: string;
  updated_at: string;
}

export async function describeRun(engine: TurnEngine, tenant: string, runId: string): Promise<RunSummary> {
  const loaded = await loadSession(engine.store, tenant, runId, 0);
  const { head } = loaded;
  const workflow = await compiledVersion(engine, tenant, head.workflowId, head.version);
  const canvas = loaded.latest ? Canvas.restore(workflow, { ...(loaded.latest.state as object), history: [] }) : Canvas.create(workflow, { seed: 0 });
  const inFlight = head.claim && head.claim.expiresAt > (engine.clock ?? Date.now)() ? head.claim.turn : null;
  const status = (inFlight !== null ? 'running' : canvas.status) as RunStatus;
  return {
    run_id: head.id,
    workflow_id: head.workflowId,
    version: head.version,
    status,
    turn_number: head.turn,
    turn_in_progress: inFlight,
    queued_turns: head.claim?.inbox?.length ?? 0,
    is_waiting_for_input: status === 'waiting_for_input',
    is_terminal: canvas.isTerminal,
    next_input_hint: hintOf(canvas.prompt),
    has_active_companions: false,
    timer_due_at: canvas.prompt?.due_at !== undefined ? new Date(canvas.prompt.due_at).toISOString() : null,
    has_background_work: canvas.status === 'waiting_for_input' && canvas.prompt?.due_at !== undefined,
    user_id: head.userId,
    forked_from: head.forkedFrom ? { run_id: head.forkedFrom.runId, turn_number: head.forkedFrom.turn } : null,
    created_at: head.createdAt,
    updated_at: head.updatedAt,
  };
}

function hintOf(prompt: PendingPrompt | null): NextInputHint | null {
  if (!prompt) return null;
  return { component_id: prompt.component_ids[0] ?? '', tips: prompt.tips, inputs: prompt.inputs as Record<string, FieldView> };
}

export interface TurnItem {
  turn_number: number;
  status: string;
  created_at: string;
  request: unknown;
  /** The response body as it was returned. */
  response: string;
  /** The calls the turn made outside the run (one turn read alone). */
  calls?: { records: unknown[]; dropped: number };
}

export async function runTurns(engine: TurnEngine, tenant: string, runId: string, after: number, limit: number): Promise<{ items: TurnItem[]; more: boolean }> {
  await loadSession(engine.store, tenant, runId, 0); // 404 for unknown or expired runs
  const { turns, more } = await listTurns(engine.store, tenant, runId, after, limit);
  return {
    items: turns.map((t) => ({ turn_number: t.turn, status: t.status, created_at: t.createdAt, request: t.request, response: t.response })),
    more,
  };
}

export async function runTurn(engine: TurnEngine, tenant: string, runId: string, turn: number): Promise<TurnItem | null> {
  await loadSession(engine.store, tenant, runId, 0);
  const t = await getTurn(engine.store, tenant, runId, turn);
  return t ? { turn_number: t.turn, status: t.status, created_at: t.createdAt, request: t.request, response: t.response, calls: t.calls } : null;
}

export async function deleteRun(engine: TurnEngine, tenant: string, runId: string): Promise<void> {
  await loadSession(engine.store, tenant, runId, 0);
  await deleteSession(engine.store, tenant, runId);
}
