/**
 * Content parts through each provider's real client: images as bytes reach an OpenAI-compatible
 * server as `image_url` parts with `data:` URLs and a Bedrock ConverseStream server as `image`
 * blocks; plain text is sent as before; echo says it was given images it cannot see.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBedrockProvider } from '../../lib/llm/bedrock';
import { createEchoModel } from '../../lib/llm/echo';
import { createOpenAiProvider } from '../../lib/llm/openai';
import { type ChatMessage, type ChatModel, complete, contentText } from '../../lib/llm/types';
import { png } from '../helpers/png';
import { BedrockTestServer, textAnswer } from './bedrock-server';
import { OpenAiServer } from './openai-server';

const FAST = { attempts: 1, baseDelayMs: 5, maxDelayMs: 20 };
const photo = png(4, 4, 1);
const other = png(2, 3, 2);

const withImages: ChatMessage[] = [
  { role: 'system', content: 'You read signs.' },
  { role: 'user', content: 'earlier question' },
  { role: 'assistant', content: 'earlier answer' },
  {
    role: 'user',
    content: [
      { type: 'image', mime_type: 'image/png', bytes: photo },
      { type: 'image', mime_type: 'image/png', bytes: other },
      { type: 'text', text: 'What does the sign say?' },
    ],
  },
];

let openai: OpenAiServer;
let bedrock: BedrockTestServer;
beforeAll(async () => {
  openai = await OpenAiServer.start();
  bedrock = await BedrockTestServer.start();
});
afterAll(async () => {
  await openai.close();
  await bedrock.close();
});

describe('content parts', () => {
  it('reach an OpenAI-compatible server as image_url parts with data: URLs; text stays a string', async () => {
    openai.enqueue({ kind: 'text', text: 'It says STOP.' });
    const provider = createOpenAiProvider({ baseUrl: openai.url, timeoutMs: 5_000, retry: FAST });
    const model: ChatModel = { id: 'openai:vision', chat: (options) => provider.chat({ ...options, model: 'vision' }) };
    const result = await complete(model, { messages: withImages });
    expect(result.text).toBe('It says STOP.');

    const request = openai.requests.at(-1);
    expect(request?.contents.slice(0, 3)).toEqual(['You read signs.', 'earlier question', 'earlier answer']);
    const parts = request?.contents[3];
    expect(Array.isArray(parts)).toBe(true);
    expect((parts as { type: string }[]).map((p) => p.type)).toEqual(['image_url', 'image_url', 'text']);
    expect((parts as { image_url?: { url: string } }[])[0]?.image_url?.url).toBe(`data:image/png;base64,${photo.toString('base64')}`);
    expect(request?.images.map((i) => [i.message, i.mime_type])).toEqual([[3, 'image/png'], [3, 'image/png']]);
    expect(request?.images[0]?.bytes.equals(photo)).toBe(true);
    expect(request?.images[1]?.bytes.equals(other)).toBe(true);
    expect(request?.body.messages[3]?.content).toBe('What does the sign say?');
  });

  it('reach Bedrock Converse as image blocks holding the bytes, with the format', async () => {
    bedrock.reset();
    bedrock.enqueue(textAnswer('It says STOP.'));
    const provider = createBedrockProvider({
      region: 'us-east-1',
      endpoint: bedrock.endpoint,
      credentials: { accessKeyId: 'AKIAEASELTESTFAKE0002', secretAccessKey: 'fake-secret-for-images-test-0000000000000' },
      timeoutMs: 5_000,
      retry: FAST,
    });
    let text = '';
    for await (const e of provider.chat({ model: 'anthropic.claude-3-5-sonnet', messages: withImages })) if (e.type === 'text') text += e.text;
    expect(text).toBe('It says STOP.');

    const request = bedrock.requests.at(-1);
    expect(request?.body.system).toEqual([{ text: 'You read signs.' }]);
    const last = request?.body.messages.at(-1);
    expect(last.role).toBe('user');
    expect(last.content.map((b: Record<string, unknown>) => Object.keys(b)[0])).toEqual(['image', 'image', 'text']);
    expect(last.content[2]).toEqual({ text: 'What does the sign say?' });
    expect(request?.images.map((i) => i.format)).toEqual(['png', 'png']);
    expect(request?.images[0]?.bytes.equals(photo)).toBe(true);
    expect(request?.images[1]?.bytes.equals(other)).toBe(true);
    // the earlier turns are plain text blocks, as before
    expect(request?.body.messages[0]).toEqual({ role: 'user', content: [{ text: 'earlier question' }] });
  });

  it('are not seen by echo, which says so (also in JSON answers)', async () => {
    const echo = createEchoModel();
    const answer = await complete(echo, { messages: withImages });
    expect(answer.text).toBe(`echo: What does the sign say?\n\n[echo cannot see images: it was given 2 images (image/png, ${photo.length} bytes; image/png, ${other.length} bytes)]`);
    const json = await complete(echo, { messages: withImages, json: true });
    expect(JSON.parse(json.text)).toEqual({ echo: 'What does the sign say?', images_not_seen: 2 });
    // without images, nothing is added
    expect((await complete(echo, { messages: [{ role: 'user', content: 'hi' }] })).text).toBe('echo: hi');
  });

  it('read as text where a protocol takes text only', () => {
    expect(contentText([{ type: 'text', text: 'a' }, { type: 'image', mime_type: 'image/png', bytes: photo }, { type: 'text', text: 'b' }])).toBe('a\n\nb');
    expect(contentText('plain')).toBe('plain');
  });
});
