/**
 * RAGFlow's OpenAI-compatible mode (`/agents_openai/{id}/chat/completions`, or
 * `/agents/chat/completions` with `openai-compatible`): the last user message is the query; the
 * session continues through `session_id` (or `metadata.session_id`, `id`, `metadata.id`); every
 * response and chunk names the session as its `id` and carries an `easel` object with the
 * run's status, turn and what it waits for, and the turn's `notice` (null unless text sent
 * while a form waits answered none of it); form answers go in `metadata.inputs`. Its new
 * sessions are on RAGFlow's `agent` path, with RAGFlow's Begin rules. A turn's references
 * (retrieved chunks) come as RAGFlow sends them: a chunk with `delta.reference` per
 * `message_end` that has some, or `message.reference` in a whole answer.
 */
import type { Context } from 'hono';
import { isRecord } from '../../canvas/references';
import type { TurnResponse } from '../../turns/response';
import type { AppDeps } from '../app';
import { feedStream, SSE_HEADERS, startStreamedTurn } from '../sse';
import type { RagflowEnv } from './context';
import { conversation, runConversation, truthy } from './conversation';
import { RAGFLOW, RagflowError, toRagflow } from './envelope';

export async function openaiCompletion(c: Context<RagflowEnv>, deps: AppDeps, agentId: string, body: Record<string, unknown>): Promise<Response> {
  // RAGFlow needs no `model` (the agent is the model) and answers a missing list with 102
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
    notice: r?.notice ?? null,
  });
  const base = { id: conv.sessionId, created, model: agentId };

  // RAGFlow streams only when asked to
  if (!truthy(body.stream)) {
    const result = await runConversation(deps, conv);
    const r = result.response;
    const reference = referenceOf(r.events);
    return c.json({
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: answerText(r), ...(reference ? { reference } : {}) }, logprobs: null, finish_reason: 'stop' }],
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
  // as RAGFlow's completion_openai: a message_end with references is a chunk of its own
  const sendReference = (data: Record<string, unknown>) => {
    if (isRecord(data.reference)) write(chunk({ content: '', reference: data.reference }, null));
  };
  const { turn } = await startStreamedTurn((started) =>
    runConversation(deps, conv, {
      onEvent: (e) => {
        started();
        if (e.event === 'message') send(e.data.content);
        if (e.event === 'message_end') sendReference(e.data);
      },
    }),
  );
  void turn.then(
    (result) => {
      const r = result.response;
      if (result.replayed) {
        send(messagesOf(r));
        for (const e of r.events) if (e.event === 'message_end') sendReference(e.data);
      }
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

/** The turn's references as RAGFlow's non-streaming answer merges them (the last message_end's win). */
function referenceOf(events: TurnResponse['events']): Record<string, unknown> | undefined {
  const merged: Record<string, unknown> = {};
  for (const e of events) if (e.event === 'message_end' && isRecord(e.data.reference)) Object.assign(merged, e.data.reference);
  return Object.keys(merged).length > 0 ? merged : undefined;
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
