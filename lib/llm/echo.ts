/**
 * `echo`: a deterministic, offline stand-in for a model, for demos and tests. It answers
 * "echo: " followed by the last user message, word by word, never calls tools, and counts
 * words as tokens. Asked for JSON, it answers `{"echo": "<last user message>"}`.
 *
 * It cannot see images. Given some, it says so instead of pretending: the answer ends with
 * `[echo cannot see images: it was given 1 image (image/png, 68 bytes)]`, and a JSON answer
 * carries `images_not_seen` (their count).
 */
import { type ChatEvent, type ChatModel, type ChatOptions, contentImages, contentText, type ImagePart } from './types';

export const ECHO_MODEL_ID = 'echo';

export function createEchoModel(): ChatModel {
  return {
    id: ECHO_MODEL_ID,
    async *chat(options: ChatOptions): AsyncGenerator<ChatEvent, void, undefined> {
      const last = [...options.messages].reverse().find((m) => m.role === 'user');
      const lastUser = last ? contentText(last.content) : '';
      const images = options.messages.flatMap((m) => contentImages(m.content));
      const answer = options.json
        ? JSON.stringify({ echo: lastUser, ...(images.length > 0 ? { images_not_seen: images.length } : {}) })
        : `echo: ${lastUser}${images.length > 0 ? `\n\n${unseen(images)}` : ''}`;
      for (const piece of answer.split(/(?<=\s)/)) {
        if (options.signal?.aborted) return;
        yield { type: 'text', text: piece };
      }
      const prompt = options.messages.reduce((n, m) => n + words(contentText(m.content)), 0);
      const completion = words(answer);
      yield {
        type: 'done',
        usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
        finish_reason: 'stop',
      };
    },
  };
}

/** The note for images echo was given and could not look at. */
export function unseen(images: readonly ImagePart[]): string {
  const list = images.map((i) => `${i.mime_type}, ${i.bytes.byteLength} bytes`).join('; ');
  return `[echo cannot see images: it was given ${images.length} image${images.length === 1 ? '' : 's'} (${list})]`;
}

function words(text: string): number {
  return text.split(/\s+/).filter(Boolean).length;
}
