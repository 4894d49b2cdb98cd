/**
 * What a model is shown, at the engine's level (no store): RAGFlow-shaped `sys.files` (a
 * `data:image/` URL and parsed text, as RAGFlow's canvas fills it), descriptors on a host
 * without file storage, and how files are told apart by their bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classify, sniffImage } from '../../lib/components/file-kinds';
import { canvasFor, fixture, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { png } from '../helpers/png';
import { testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
});
afterAll(async () => {
  await server.close();
});

const reader = (extra: Record<string, unknown> = {}) => graph({
  begin: ['Begin', { mode: 'conversational' }, ['Agent:Read']],
  'Agent:Read': ['Agent', { llm_id: 'any', sys_prompt: 'Read what you are given.', prompts: [{ role: 'user', content: 'Q: {sys.query}' }], ...extra }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Read@content}'] }],
});

describe('files shown to a model', () => {
  it('takes RAGFlow-shaped sys.files: a data: URL becomes an image part, other strings are document text', async () => {
    server.enqueue({ kind: 'text', text: 'seen' });
    const image = png(3, 2, 9);
    const canvas = canvasFor(reader({ visual_files_var: 'sys.files' }), { services: testServices({ openaiUrl: server.url }) });
    const events = await turn(canvas, { query: 'what is it', files: [`data:image/png;base64,${image.toString('base64')}`, 'Parsed text of a report.'] });
    expect(last(events).event).toBe('workflow_finished');
    const request = server.requests.at(-1);
    // named by visual_files_var and found in sys.files: sent once
    expect(request?.images).toHaveLength(1);
    expect(request?.images[0]?.bytes.equals(image)).toBe(true);
    expect(request?.body.messages.at(-1)?.content).toBe('Q: what is it\n\nParsed text of a report.');
  });

  it('uses the text a descriptor carries when the host has no file storage, and refuses images it cannot read', async () => {
    server.enqueue({ kind: 'text', text: 'ok' });
    const services = testServices({ openaiUrl: server.url });
    const doc = { file_id: `file_${'a'.repeat(32)}`, name: 'n.md', size: 5, mime_type: 'text/markdown', text: '# Hi' };
    await turn(canvasFor(reader(), { services }), { query: 'x', files: [doc] });
    expect(server.requests.at(-1)?.body.messages.at(-1)?.content).toBe('Q: x\n\n--- n.md (text/markdown) ---\n# Hi\n--- end of n.md ---');

    const calls = server.calls;
    const photo = { file_id: `file_${'b'.repeat(32)}`, name: 'p.png', size: 70, mime_type: 'image/png' };
    const events = await turn(canvasFor(reader(), { services }), { query: 'x', files: [photo] });
    expect(last(events)).toMatchObject({ event: 'workflow_failed', data: { error: { component_id: 'Agent:Read', message: expect.stringContaining('uploaded files cannot be read in this run') } } });
    expect(server.calls).toBe(calls);
  });

  it('stay in an Agent’s prompt for every round of tool calls, and reach its sub-Agents', async () => {
    server.enqueue(
      { kind: 'tools', calls: [{ name: 'Weather_Expert_0', arguments: { user_prompt: 'What is in the photo?' } }] },
      { kind: 'text', text: 'Snow.' },
      { kind: 'text', text: 'Pack boots.' },
    );
    const image = png(2, 2, 4);
    const canvas = canvasFor(fixture('agent-subagent'), { services: testServices({ openaiUrl: server.url }) });
    const events = await turn(canvas, { query: 'What to pack?', files: [`data:image/png;base64,${image.toString('base64')}`] });
    expect(messages(events)).toEqual(['Pack boots.']);
    const [round1, sub, round2] = server.requests.slice(-3);
    for (const request of [round1, sub, round2]) {
      expect(request?.images.map((i) => i.bytes.equals(image))).toEqual([true]);
    }
    expect(sub?.body.messages.at(-1)?.content).toBe('QUERY:\nWhat is in the photo?');
    expect(round2?.body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
  });

  it('tells images by their bytes and documents by type, name or content', () => {
    expect(sniffImage(png())).toBe('image/png');
    expect(sniffImage(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(sniffImage(Buffer.from('GIF89a...'))).toBe('image/gif');
    expect(sniffImage(Buffer.from('RIFF\u0000\u0000\u0000\u0000WEBPVP8 '))).toBe('image/webp');
    expect(classify(png(), 'application/octet-stream', 'x.bin')).toEqual({ kind: 'image', mime_type: 'image/png' });
    expect(classify(Buffer.from('a,b\n1,2'), 'text/csv', 'x.csv')).toEqual({ kind: 'text', text: 'a,b\n1,2' });
    expect(classify(Buffer.from('\ufeff# Title'), 'application/octet-stream', 'x.md')).toEqual({ kind: 'text', text: '# Title' });
    expect(classify(Buffer.from('<p>a &lt; b</p>'), 'text/html', 'x.html')).toEqual({ kind: 'text', text: 'a < b' });
    expect(classify(Buffer.from('BM....'), 'image/bmp', 'x.bmp')).toMatchObject({ kind: 'unreadable', why: expect.stringContaining('PNG, JPEG, GIF and WebP') });
    expect(classify(Buffer.from('%PDF-1.4'), 'application/pdf', 'x.pdf')).toMatchObject({ kind: 'unreadable', why: 'PDF text is not extracted here' });
    expect(classify(Buffer.from('PK\u0003\u0004rest'), 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'x.docx')).toMatchObject({ kind: 'unreadable' });
    expect(classify(Buffer.from([0x00, 0x01, 0x02]), 'application/octet-stream', 'x.bin')).toEqual({ kind: 'unreadable', why: 'it is a binary file' });
  });
});
