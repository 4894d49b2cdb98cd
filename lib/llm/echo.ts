/**
 * `echo`: a deterministic, offline stand-in for a model, for demos and tests. It answers
 * "echo: " followed by the last user message, word by word, never calls tools, and counts
 * words as tokens. Asked for JSON, it answers `{"echo": "<last user message>"}`.
 */
import type { ChatEvent, ChatModel, ChatOptions } from './types';

export const ECHO_MODEL_ID = 'echo';

export function createEchoModel(): ChatModel {
  return {
    id: ECHO_MODEL_ID,
    async *chat(options: ChatOptions): AsyncGenerator<ChatEvent, void, undefined> {
      const lastUser = [...options.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
      const answer = options.json ? JSON.stringify({ echo: lastUser }) : `echo: ${lastUser}`;
      for (const piece of answer.split(/(?<=\s)/)) {
        if (options.signal?.aborted) return;
        yield { type: 'text', text: piece };
      }
      const prompt = options.messages.reduce((n, m) => n + words(m.content), 0);
      const completion = words(answer);
      yield {
        type: 'done',
        usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
        finish_reason: 'stop',
      };
    },
  };
}

function words(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}
