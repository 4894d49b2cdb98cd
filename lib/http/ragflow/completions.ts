/**
 * Conversing with an agent, RAGFlow's way (agent-completions.ts) and OpenAI's way
 * (openai-completions.ts), both over one turn of a run; mounted under /api/v1 behind the
 * RAGFlow auth (index.ts). Each takes an Idempotency-Key as the native execute does.
 */
import { Hono } from 'hono';
import type { Context } from 'hono';
import type { AppDeps } from '../app';
import { agentCompletion } from './agent-completions';
import { param, type RagflowEnv } from './context';
import { truthy } from './conversation';
import { guarded, jsonBody, RAGFLOW, RagflowError } from './envelope';
import { openaiCompletion } from './openai-completions';

export function completionRoutes(deps: AppDeps): Hono<RagflowEnv> {
  const app = new Hono<RagflowEnv>();
  const guard = (h: (c: Context<RagflowEnv>) => Promise<Response>) => guarded(h as (c: Context) => Promise<Response>, (e) => deps.logger?.error('ragflow route failed', { error: String(e) }));

  app.post('/agents/chat/completions', guard(async (c) => {
    const body = await jsonBody(c);
    const agentId = typeof body.agent_id === 'string' ? body.agent_id : '';
    if (!agentId) throw new RagflowError(RAGFLOW.argument, '`agent_id` is required.');
    return truthy(body['openai-compatible']) ? openaiCompletion(c, deps, agentId, body) : agentCompletion(c, deps, agentId, body);
  }));
  app.post('/agents/:id/completions', guard(async (c) => agentCompletion(c, deps, param(c, 'id'), await jsonBody(c))));
  app.post('/agents_openai/:id/chat/completions', guard(async (c) => openaiCompletion(c, deps, param(c, 'id'), await jsonBody(c))));
  return app;
}
