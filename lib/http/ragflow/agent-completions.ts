/**
 * RAGFlow's own completion mode (`/agents/chat/completions`, `/agents/{id}/completions`): SSE
 * frames `data:{json}` of `{event, message_id, created_at, task_id, data, session_id}` ending
 * `data:[DONE]`, or one answer built from them. Which events go out depends on the session's
 * path in RAGFlow's agent_api.py, kept here as a table:
 *
 * | path | sessions | streamed | answer without streaming |
 * |---|---|---|---|
 * | `workflow` | new ones, and those a new-session completion started | every canvas event | the last event, with `content` (all messages), `reference`, `structured`, `trace` (return_trace) |
 * | `agent` | created by `POST /agents/{id}/sessions` (or the OpenAI mode) | `node_finished` (its `trace` so far with return_trace), `message`, `message_end`, `user_inputs`, `workflow_finished` reduced to `{usage}` | `message_end` (else the first `user_inputs`), with `content`, `reference`, `usage`, `structured`, `trace` (return_trace) |
 *
 * Easel's own terminal events (`workflow_failed`, `workflow_cancelled`, `workflow_interrupted`, `workflow_aborted`) go
 * out on both paths; on the `agent` path an answer without `message_end` or `user_inputs` is
 * built from them, so a failure is never an empty answer. A turn's `notice` (text sent while a
 * form waits, lib/turns/response.ts) is `data.notice` of an answer, and a `notice` frame
 * before `[DONE]` of a stream.
 */
import { randomUUID } from 'node:crypto';
import type { Context } from 'hono';
import type { CanvasEvent } from '../../canvas';
import { isRecord } from '../../canvas/references';
import { getHead } from '../../store/sessions';
import type { TurnNotice } from '../../turns/response';
import type { AppDeps } from '../app';
import { feedStream, SSE_HEADERS, startStreamedTurn } from '../sse';
import type { RagflowEnv } from './context';
import { conversation, runConversation, truthy } from './conversation';
import { toRagflow } from './envelope';

export type SessionPath = 'workflow' | 'agent';

const EASEL_TERMINALS = new Set(['workflow_failed', 'workflow_cancelled', 'workflow_interrupted', 'workflow_aborted']);
const AGENT_PATH_EVENTS = new Set(['node_finished', 'message', 'message_end', 'user_inputs', 'workflow_finished', ...EASEL_TERMINALS]);

interface Frame {
  event: string;
  message_id: string;
  created_at: number;
  task_id: string;
  data: Record<string, unknown>;
  session_id: string;
}

/** Shapes one session's events as RAGFlow sends them on its path, and builds the answer. */
class RagflowEvents {
  readonly messageId = randomUUID().replaceAll('-', '');
  readonly createdAt = Math.floor(Date.now() / 1000);
  private readonly traced: { component_id: string; trace: unknown[] }[] = [];
  private readonly structured: Record<string, unknown> = {};
  private readonly reference: Record<string, unknown> = {};
  private content = '';
  private usage: unknown;
  private last: Frame | undefined;
  private end: Frame | undefined;
  private firstInputs: Frame | undefined;
  private terminal: Frame | undefined;

  constructor(
    private readonly sessionId: string,
    private readonly trace: boolean,
    /** Decided once the run is known: a new session's, or the loaded session's. */
    public path: SessionPath,
  ) {}

  /** The frame to send for an event, or undefined when this path leaves it out. */
  frame(e: CanvasEvent): Frame | undefined {
    const data = { ...(e.data as Record<string, unknown>) };
    if (e.event === 'message') this.content += String(data.content ?? '');
    if (isRecord(data.reference)) Object.assign(this.reference, data.reference);
    if (e.event === 'node_finished') {
      const outputs = isRecord(data.outputs) ? data.outputs : {};
      if ('structured' in outputs) this.structured[String(data.component_id)] = outputs.structured;
      if (this.trace) this.traced.push({ component_id: String(data.component_id), trace: [{ ...data }] });
    }
    const framed = (d: Record<string, unknown>): Frame => ({ event: e.event, message_id: this.messageId, created_at: this.createdAt, task_id: this.sessionId, data: d, session_id: this.sessionId });
    if (this.path === 'workflow') {
      this.last = framed(data);
      return this.last;
    }
    if (!AGENT_PATH_EVENTS.has(e.event)) return undefined;
    if (e.event === 'workflow_finished') {
      this.usage = data.usage;
      return data.usage === undefined ? undefined : framed({ usage: data.usage });
    }
    const out = framed(e.event === 'node_finished' && this.trace ? { ...data, trace: [...this.traced] } : data);
    if (e.event === 'message_end') this.end = out;
    if (e.event === 'user_inputs') this.firstInputs ??= out;
    if (EASEL_TERMINALS.has(e.event)) this.terminal = out;
    return out;
  }

  /** Easel's `notice` frame: `{event: "notice", ..., data: {code, message}}`. */
  noticeFrame(notice: TurnNotice): Frame {
    return { event: 'notice', message_id: this.messageId, created_at: this.createdAt, task_id: this.sessionId, data: { ...notice }, session_id: this.sessionId };
  }

  /** The answer without streaming, as RAGFlow builds it on this path. */
  answer(): Frame | { session_id: string } {
    const final = this.path === 'workflow' ? this.last : (this.end ?? this.firstInputs ?? this.terminal);
    if (!final) return { session_id: this.sessionId };
    const data: Record<string, unknown> = { ...final.data, content: this.content, reference: this.reference };
    if (this.path === 'agent' && this.usage) data.usage = this.usage;
    if (Object.keys(this.structured).length > 0) data.structured = this.structured;
    if (this.trace && (this.path === 'agent' || this.traced.length > 0)) data.trace = this.traced;
    return { ...final, data };
  }
}

export async function agentCompletion(c: Context<RagflowEnv>, deps: AppDeps, agentId: string, body: Record<string, unknown>): Promise<Response> {
  const sessionId = typeof body.session_id === 'string' && body.session_id ? body.session_id : undefined;
  const conv = await conversation(c, deps, agentId, {
    query: body.query !== undefined && body.query !== '' ? body.query : body.question,
    ...(sessionId ? { sessionId } : { source: 'workflow' as const }),
    inputs: body.inputs,
    userId: body.user_id,
    files: body.files,
  });
  // a new session is on the workflow path; a loaded one says its own before its first event
  const events = new RagflowEvents(conv.sessionId, truthy(body.return_trace), conv.isNew ? 'workflow' : 'agent');
  const onLoaded = (head: { source?: 'workflow' }) => {
    events.path = head.source === 'workflow' ? 'workflow' : 'agent';
  };

  if (!truthy(body.stream)) {
    const result = await runConversation(deps, conv, { onLoaded });
    if (result.replayed) await replayedPath(deps, conv, events);
    for (const e of result.response.events) events.frame(e);
    // beside the answer's fields, where RAGFlow's clients (which read `data.content`) leave it
    const notice = result.response.notice;
    return c.json({ code: 0, data: { ...events.answer(), ...(notice ? { notice } : {}) } });
  }

  const { stream, write, close } = feedStream();
  const send = (e: CanvasEvent) => {
    const frame = events.frame(e);
    if (frame) write(`data:${JSON.stringify(frame)}\n\n`);
  };
  const { turn } = await startStreamedTurn((started) =>
    runConversation(deps, conv, {
      onLoaded,
      onEvent: (e) => {
        started();
        send(e);
      },
    }),
  );
  void turn.then(
    async (result) => {
      if (result.replayed) {
        await replayedPath(deps, conv, events).catch(() => undefined);
        for (const e of result.response.events) send(e);
      }
      // a frame of its own at the end: clients that follow `message` events pass over it
      if (result.response.notice) write(`data:${JSON.stringify(events.noticeFrame(result.response.notice))}\n\n`);
      write('data:[DONE]\n\n');
      close();
    },
    (error: unknown) => {
      const mapped = toRagflow(error);
      write(`data:${JSON.stringify({ code: 500, message: mapped.message, data: false })}\n\n`);
      write('data:[DONE]\n\n');
      close();
    },
  );
  return new Response(stream, { status: 200, headers: SSE_HEADERS });
}

/** A replayed turn of an existing session loaded nothing: its path is read from its head. */
async function replayedPath(deps: AppDeps, conv: { isNew: boolean; sessionId: string; request: { tenant: string } }, events: RagflowEvents): Promise<void> {
  if (conv.isNew) return;
  const head = await getHead(deps.engine.store, conv.request.tenant, conv.sessionId);
  events.path = head.source === 'workflow' ? 'workflow' : 'agent';
}
