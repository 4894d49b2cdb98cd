/**
 * Conversing with an agent, RAGFlow's way and OpenAI's way, both over one turn of a run.
 *
 * RAGFlow (`/agents/chat/completions`, `/agents/{id}/completions`): SSE frames `data:{json}`
 * carrying `{event, message_id, created_at, task_id, session_id, data}` and ending `data:[DONE]`,
 * or, without streaming, the last event with `data.content` joined. Frames that would trip
 * RAGFlow's SDK before the first `message_end` (node events without content) are left out
 * unless `return_trace` asks for them; a pause ends with `user_inputs` carrying the tips as
 * its content.
 *
 * OpenAI (`/agents_openai/{id}/chat/completions`): the last user message is the query; the
 * session continues through `session_id` (or `metadata.session_id`, `id`, `metadata.id`); every
 * response and chunk names the session as its `id` and carries an `easel` object with the
 * run's status, turn and what it waits for; form answers go in `metadata.inputs`.
 */
import { randomUUID } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { type CanvasEvent, NotWaitingForInputError, type RunInput } from '../../canvas';
import { isRecord } from '../../canvas/references';
import { NotFoundError } from '../../store/errors';
import { getWorkflow } from '../../store/workflows';
import { executeTurn, newRunId, type TurnRequest, type TurnResult } from '../../turns/execute';
import { resolveFileList } from '../../turns/files';
import type { TurnResponse } from '../../turns/response';
import { actorOf, fileAccess, idempotencyPrincipal, newRunUser, runAuthorizer } from '../access';
import type { AppDeps } from '../app';
import { WORKFLOW_ID } from '../schemas';
import { feedStream, SSE_HEADERS, startStreamedTurn } from '../sse';
import { param, type RagflowEnv } from './agents';
import { guarded, jsonBody, RAGFLOW, RagflowError, toRagflow } from './envelope';

export function registerCompletionRoutes(app: Hono<RagflowEnv>, deps: AppDeps): void {
  const guard = (h: (c: Context<RagflowEnv>) => Promise<Response>) => guarded(h as (c: Context) => Promise<Response>, (e) => deps.logger?.error('ragflow route failed', { error: String(e) }));

  app.post('/api/v1/agents/chat/completions', guard(async (c) => {
    const body = await jsonBody(c);
    const agentId = typeof body.agent_id === 'string' ? body.agent_id : '';
    if (!agentId) throw new RagflowError(RAGFLOW.argument, '`agent_id` is required.');
    return body['openai-compatible'] === true ? openai(c, deps, agentId, body) : ragflow(c, deps, agentId, body);
  }));
  app.post('/api/v1/agents/:id/completions', guard(async (c) => ragflow(c, deps, param(c, 'id'), await jsonBody(c))));
  app.post('/api/v1/agents_openai/:id/chat/completions', guard(async (c) => openai(c, deps, param(c, 'id'), await jsonBody(c))));
}

interface Conversation {
  agentId: string;
  sessionId: string;
  isNew: boolean;
  request: TurnRequest;
}

/** The turn a RAGFlow or OpenAI request stands for; the agent must be the key's. */
async function conversation(c: Context<RagflowEnv>, deps: AppDeps, agentId: string, fields: { query: string; sessionId?: string; inputs?: unknown; userId?: unknown; files?: unknown }): Promise<Conversation> {
  const principal = c.get('principal');
  const denied = new RagflowError(RAGFLOW.data, `You don't own the agent ${agentId}`);
  if (principal.scope !== 'admin' && !principal.workflowIds.includes(agentId)) throw denied;
  if (principal.endUser && !principal.endUser.workflowIds.includes(agentId)) throw denied;
  // no workflow has an id of another shape; one too long for a DynamoDB key must not reach it
  if (!WORKFLOW_ID.safeParse(agentId).success) throw denied;
  try {
    if ((await getWorkflow(deps.engine.store, principal.tenant, agentId)).deleted) throw denied;
  } catch (error) {
    if (error instanceof NotFoundError) throw denied;
    throw error;
  }
  if (fields.sessionId !== undefined && !/^[0-9a-f]{32}$/.test(fields.sessionId)) throw new RagflowError(RAGFLOW.data, 'Session not found!');
  const runInput: RunInput = {};
  if (fields.query) runInput.query = fields.query;
  if (isRecord(fields.inputs) && Object.keys(fields.inputs).length > 0) runInput.inputs = fields.inputs;
  // an end user's sessions carry the user the token asserts, whatever user_id was sent
  if (principal.endUser) runInput.user_id = principal.endUser.id;
  else if (typeof fields.userId === 'string' && fields.userId) runInput.user_id = fields.userId;
  const sessionId = fields.sessionId ?? newRunId();
  const files = fileAccess(principal, deps.access);
  if (Array.isArray(fields.files) && fields.files.length > 0) {
    const keepUntil = Math.floor(Date.now() / 1000) + (deps.engine.sessionTtlSeconds ?? 30 * 86_400);
    runInput.files = await resolveFileList(deps.engine, principal.tenant, fields.files, keepUntil, { runId: sessionId, ...(files ? { access: files } : {}) });
  }
  const authorize = fields.sessionId ? runAuthorizer(principal) : undefined;
  const clientAddress = deps.clientAddress?.(c);
  return {
    agentId,
    sessionId,
    isNew: fields.sessionId === undefined,
    request: {
      tenant: principal.tenant,
      workflowId: agentId,
      principal: idempotencyPrincipal(principal),
      actor: actorOf(principal),
      ...(authorize ? { authorize } : {}),
      ...(files ? { fileAccess: files } : {}),
      ...(fields.sessionId ? { runId: fields.sessionId } : { newRunId: sessionId, runUserId: newRunUser(principal, runInput.user_id) }),
      ...(clientAddress ? { clientAddress } : {}),
      runInput,
    },
  };
}

/**
 * Runs the turn. RAGFlow clients may send Begin's inputs with every message; once the run is
 * past its first turn and not waiting for a form, they are dropped rather than refused.
 */
async function run(deps: AppDeps, conv: Conversation, onEvent?: (e: CanvasEvent) => void): Promise<TurnResult> {
  const request = { ...conv.request, ...(onEvent ? { onEvent } : {}) };
  try {
    return await executeTurn(deps.engine, request);
  } catch (error) {
    if (error instanceof NotWaitingForInputError && request.runInput?.inputs) {
      const { inputs: _dropped, ...rest } = request.runInput;
      return executeTurn(deps.engine, { ...request, runInput: rest });
    }
    if (error instanceof NotFoundError && error.what === 'run') throw new RagflowError(RAGFLOW.data, 'Session not found!');
    throw error;
  }
}

// ---- RAGFlow ------------------------------------------------------------------------------

const FORWARDED = new Set(['message', 'message_end', 'user_inputs', 'workflow_finished', 'workflow_failed', 'workflow_cancelled', 'workflow_aborted']);

async function ragflow(c: Context<RagflowEnv>, deps: AppDeps, agentId: string, body: Record<string, unknown>): Promise<Response> {
  const query = typeof body.query === 'string' ? body.query : typeof body.question === 'string' ? body.question : '';
  const conv = await conversation(c, deps, agentId, {
    query,
    ...(typeof body.session_id === 'string' && body.session_id ? { sessionId: body.session_id } : {}),
    inputs: body.inputs,
    userId: body.user_id,
    files: body.files,
  });
  const trace = body.return_trace === true;
  const messageId = randomUUID().replaceAll('-', '');
  const createdAt = Math.floor(Date.now() / 1000);
  const traced: { component_id: string; trace: unknown[] }[] = [];
  let text = '';
  const envelope = (e: CanvasEvent) => {
    let data = e.data as Record<string, unknown>;
    if (e.event === 'message') text += String(data.content ?? '');
    if (e.event === 'message_end') data = { reference: null, ...data };
    if (e.event === 'node_finished' && trace) {
      traced.push({ component_id: String(data.component_id), trace: [data] });
      data = { ...data, trace: [...traced] };
    }
    if (e.event === 'user_inputs') data = { ...data, content: String(data.tips ?? '') };
    return { event: e.event, message_id: messageId, created_at: createdAt, task_id: agentId, data, session_id: conv.sessionId };
  };
  const forwarded = (e: CanvasEvent) => FORWARDED.has(e.event) || (trace && e.event === 'node_finished');

  if (body.stream === false) {
    let last: ReturnType<typeof envelope> | undefined;
    const result = await run(deps, conv, (e) => {
      const framed = envelope(e);
      if (forwarded(e)) last = framed;
    });
    last ??= envelope(result.response.events.at(-1) as CanvasEvent);
    return c.json({ code: 0, data: { ...last, data: { ...last.data, content: text, reference: {}, ...(trace ? { trace: traced } : {}) } } });
  }

  const { stream, write, close } = feedStream();
  const { turn } = await startStreamedTurn((started) =>
    run(deps, conv, (e) => {
      started();
      if (forwarded(e)) write(`data:${JSON.stringify(envelope(e))}\n\n`);
    }),
  );
  void turn.then(
    (result) => {
      if (result.replayed) for (const e of result.response.events) if (forwarded(e)) write(`data:${JSON.stringify(envelope(e))}\n\n`);
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

// ---- OpenAI -------------------------------------------------------------------------------

async function openai(c: Context<RagflowEnv>, deps: AppDeps, agentId: string, body: Record<string, unknown>): Promise<Response> {
  const missing = ['model', 'messages'].filter((k) => body[k] === undefined);
  if (missing.length > 0) return c.json({ code: RAGFLOW.argument, message: `required argument are missing: ${missing.join(',')}; `, data: null });
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new RagflowError(RAGFLOW.data, 'You must provide at least one message.');
  const lastUser = [...body.messages].reverse().find((m) => isRecord(m) && m.role === 'user') as Record<string, unknown> | undefined;
  const query = lastUser ? contentText(lastUser.content) : '';
  const metadata = isRecord(body.metadata) ? body.metadata : {};
  const sessionId = [body.session_id, metadata.session_id, body.id, metadata.id].find((v): v is string => typeof v === 'string' && v !== '');
  const conv = await conversation(c, deps, agentId, {
    query,
    ...(sessionId ? { sessionId } : {}),
    // OpenAI's metadata values are strings: form answers may come as JSON text
    inputs: parseMaybeJson(metadata.inputs) ?? body.inputs,
    userId: body.user ?? body.user_id,
  });
  const created = Math.floor(Date.now() / 1000);
  const easelOf = (r?: TurnResponse) => ({
    session_id: conv.sessionId,
    status: r?.status ?? 'running',
    turn_number: r?.turn_number ?? null,
    next_input_hint: r?.next_input_hint ?? null,
  });
  const base = { id: conv.sessionId, created, model: agentId };

  if (body.stream !== true) {
    const result = await run(deps, conv);
    const r = result.response;
    return c.json({
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: answerText(r) }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: r.usage.prompt_tokens, completion_tokens: r.usage.completion_tokens, total_tokens: r.usage.total_tokens },
      easel: easelOf(r),
    });
  }

  const { stream, write, close } = feedStream();
  const chunk = (delta: Record<string, unknown>, finish: string | null, r?: TurnResponse, usage?: unknown) =>
    `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(usage ? { usage } : {}), easel: easelOf(r) })}\n\n`;
  let first = true;
  const send = (content: string) => {
    if (content === '') return;
    write(chunk(first ? { role: 'assistant', content } : { content }, null));
    first = false;
  };
  const { turn } = await startStreamedTurn((started) =>
    run(deps, conv, (e) => {
      started();
      if (e.event === 'message') send(e.data.content);
    }),
  );
  void turn.then(
    (result) => {
      const r = result.response;
      if (result.replayed) send(messagesOf(r));
      if (r.next_input_hint) send(`${messagesOf(r) ? '\n\n' : ''}${r.next_input_hint.tips}`);
      const usage = { prompt_tokens: r.usage.prompt_tokens, completion_tokens: r.usage.completion_tokens, total_tokens: r.usage.total_tokens };
      write(chunk({}, 'stop', r, usage));
      write('data: [DONE]\n\n');
      close();
    },
    (error: unknown) => {
      write(chunk({ content: `**ERROR**: ${toRagflow(error).message}` }, 'stop'));
      write('data: [DONE]\n\n');
      close();
    },
  );
  return new Response(stream, { status: 200, headers: SSE_HEADERS });
}

function parseMaybeJson(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    throw new RagflowError(RAGFLOW.argument, 'metadata.inputs must be an object or its JSON text.');
  }
}

/** Text of an OpenAI message content: a string or a list of parts. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (isRecord(p) && typeof p.text === 'string' ? p.text : '')).join('');
  return '';
}

function messagesOf(r: TurnResponse): string {
  return r.events.filter((e) => e.event === 'message').map((e) => (e.data as { content: string }).content).join('');
}

/** What the assistant says: the messages shown, then the form's tips when the run pauses. */
function answerText(r: TurnResponse): string {
  const shown = messagesOf(r);
  if (!r.next_input_hint) return shown;
  return shown ? `${shown}\n\n${r.next_input_hint.tips}` : r.next_input_hint.tips;
}
