/**
 * The CLI's parts in process: answers typed for each field type, prompts, the SSE reader over
 * arbitrary chunk boundaries, the line reader with piped input that arrives before anyone asks,
 * the spinner (TTY only), refusal messages, and usage errors of `main` (exit code 2).
 */
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { describeRefusal, type FieldView } from '../../lib/cli/client';
import { askForm, parseAnswer, promptFor } from '../../lib/cli/forms';
import { main } from '../../lib/cli/main';
import { parseFrame, readSse } from '../../lib/cli/sse';
import { LineReader, spinner, type Io } from '../../lib/cli/terminal';

const field = (type: string, extra: Partial<FieldView> = {}): FieldView => ({ name: 'F', type, optional: false, value: null, ...extra });

function sink(isTTY = false) {
  const chunks: string[] = [];
  return { isTTY, write: (c: string | Uint8Array) => (chunks.push(String(c)), true), text: () => chunks.join('') };
}

describe('answers typed in the terminal', () => {
  it('become values of the field type, or a reason', () => {
    expect(parseAnswer(field('line'), '  Ada Lovelace ')).toEqual({ kind: 'value', value: '  Ada Lovelace ' });
    expect(parseAnswer(field('options', { options: ['free', 'pro'] }), '2')).toEqual({ kind: 'value', value: 'pro' });
    expect(parseAnswer(field('options', { options: ['free', 'pro'] }), 'FREE')).toEqual({ kind: 'value', value: 'free' });
    expect(parseAnswer(field('options', { options: ['free', 'pro'] }), '3')).toEqual({ kind: 'error', message: 'choose a number from 1 to 2' });
    expect(parseAnswer(field('integer'), '-42')).toEqual({ kind: 'value', value: -42 });
    expect(parseAnswer(field('integer'), '4.2').kind).toBe('error');
    expect(parseAnswer(field('float'), '0.25')).toEqual({ kind: 'value', value: 0.25 });
    expect(parseAnswer(field('number'), 'NaN').kind).toBe('error');
    expect(parseAnswer(field('boolean'), 'Y')).toEqual({ kind: 'value', value: true });
    expect(parseAnswer(field('boolean'), 'no')).toEqual({ kind: 'value', value: false });
    expect(parseAnswer(field('boolean'), 'maybe')).toEqual({ kind: 'error', message: 'answer y or n' });
    expect(parseAnswer(field('object'), '{"a": [1]}')).toEqual({ kind: 'value', value: { a: [1] } });
    expect(parseAnswer(field('object'), '"text"').kind).toBe('error');
    expect(parseAnswer(field('file'), ' ./a b.txt ')).toEqual({ kind: 'file', path: './a b.txt' });
  });

  it('may be empty for optional fields and fields that hold a value already', () => {
    expect(parseAnswer(field('line'), '').kind).toBe('error');
    expect(parseAnswer(field('line', { optional: true }), ' ')).toEqual({ kind: 'skip' });
    expect(parseAnswer(field('integer', { value: 3 }), '')).toEqual({ kind: 'skip' });
  });

  it('are asked with the type, the choice and the current value', () => {
    expect(promptFor(field('integer', { name: 'Age' }), 'age')).toBe('Age (integer): ');
    expect(promptFor(field('boolean', { name: 'News', optional: true }), 'n')).toBe('News (optional) [y/n]: ');
    expect(promptFor(field('options', { name: '', options: ['a', 'b', 'c'], value: 'b' }), 'pick')).toBe('pick [1-3] (now: b): ');
  });
});

describe('a decision asked in the terminal', () => {
  const decision = field('options', {
    name: 'Decision',
    options: ['approve', 'reject'],
    decisions: [
      { id: 'approve', label: 'Approve the refund' },
      { id: 'reject', label: 'Reject' },
    ],
  });

  it('is listed by its labels and answered by number, id or label, always as the id', async () => {
    expect(parseAnswer(decision, '1')).toEqual({ kind: 'value', value: 'approve' });
    expect(parseAnswer(decision, 'reject')).toEqual({ kind: 'value', value: 'reject' });
    expect(parseAnswer(decision, 'approve the REFUND')).toEqual({ kind: 'value', value: 'approve' });
    expect(parseAnswer(decision, 'maybe')).toEqual({ kind: 'error', message: 'choose a number from 1 to 2' });

    const input = new PassThrough();
    const out = sink();
    const lines = new LineReader(input, out);
    input.end('3\n2\n');
    const outcome = await askForm({ component_id: 'UserFillUp:Review', tips: 'Refund £40?', inputs: { decision } }, lines, out, async () => '');
    lines.close();
    expect(outcome).toEqual({ kind: 'inputs', inputs: { decision: 'reject' } });
    expect(out.text()).toContain('Decision:\n  1) Approve the refund\n  2) Reject\n');
    expect(out.text()).toContain('choose a number from 1 to 2');
  });
});

describe('readSse', () => {
  it('keeps the id of a frame: the cursor a follower reconnects from', () => {
    expect(parseFrame('id: 3.14\nevent: message\ndata: {"content":"hi"}')).toEqual({ event: 'message', data: { content: 'hi' }, id: '3.14' });
    expect(parseFrame('event: ping\ndata: plain')).toEqual({ event: 'ping', data: 'plain' });
  });

  it('yields frames whatever the chunk boundaries, JSON-parsed, CRLF and comments tolerated', async () => {
    const text = ': hello\r\nevent: message\r\ndata: {"content":"Hé"}\r\n\r\nevent: turn_response\ndata: {"status":"completed",\ndata: "turn_number":2}\n\nevent: note\ndata: plain';
    const bytes = new TextEncoder().encode(text);
    for (const size of [1, 2, 3, 7, bytes.length]) {
      const chunks: Uint8Array[] = [];
      for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.slice(i, i + size));
      const frames = [];
      for await (const f of readSse(Readable.toWeb(Readable.from(chunks)) as ReadableStream<Uint8Array>)) frames.push(f);
      expect(frames).toEqual([
        { event: 'message', data: { content: 'Hé' } },
        { event: 'turn_response', data: { status: 'completed', turn_number: 2 } },
        { event: 'note', data: 'plain' },
      ]);
    }
  });
});

describe('LineReader', () => {
  it('keeps lines that arrive before they are asked for, echoes them when piped, and ends with null', async () => {
    const input = new PassThrough();
    const out = sink();
    const lines = new LineReader(input, out);
    input.end('one\ntwo\n');
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await lines.ask('a? ')).toBe('one');
    expect(await lines.ask('b? ')).toBe('two');
    expect(await lines.ask('c? ')).toBeNull();
    expect(out.text()).toBe('a? one\nb? two\nc? \n');
    lines.close();
  });
});

describe('spinner', () => {
  it('draws and erases itself on a TTY only', () => {
    // the spinner's timer on a clock of the test's: a loaded machine fires timers late
    vi.useFakeTimers();
    const tty = sink(true);
    const s = spinner(tty, 'running turn 1…');
    vi.advanceTimersByTime(200);
    s.stop();
    vi.useRealTimers();
    s.stop();
    // drawn at once, redrawn every 80 ms (twice in 200), erased once
    expect(tty.text()).toMatch(/^\r\x1b\[2K⠋ running turn 1…(\r\x1b\[2K. running turn 1…){2}\r\x1b\[2K$/);
    const piped = sink(false);
    spinner(piped, 'x').stop();
    expect(piped.text()).toBe('');
  });
});

describe('messages and usage', () => {
  it('explain refusals with what to do', () => {
    expect(describeRefusal(409, { code: 'turn_conflict', error: 'stale', current_turn_number: 3, status: 'completed' })).toBe('this turn was already answered: the run is at turn 3 (completed) (409 turn_conflict: stale)');
    expect(describeRefusal(422, { code: 'invalid_inputs', error: 'x', fields: [{ field: 'age', message: 'expected an integer' }] })).toBe('invalid inputs: age (expected an integer)');
    expect(describeRefusal(400, { code: 'invalid_dsl', error: 'x', problems: ['begin: missing'] })).toBe('invalid DSL:\n  - begin: missing');
  });

  it('exit 2 with the usage on a bad command line, 0 with --help', async () => {
    const run = async (argv: string[], env: Record<string, string> = {}) => {
      const stdout = sink();
      const stderr = sink();
      const io: Io = { stdin: Readable.from([]), stdout, stderr, env };
      return { code: await main(argv, io), stdout: stdout.text(), stderr: stderr.text() };
    };
    expect(await run(['--help'])).toMatchObject({ code: 0, stdout: expect.stringContaining('usage: npx easel <command>') });
    expect(await run([])).toMatchObject({ code: 2, stderr: expect.stringContaining('no command given') });
    expect(await run(['workflows', 'list', '--query', 'x'])).toMatchObject({ code: 2, stderr: expect.stringContaining('--query does not go with "workflows list"') });
    expect(await run(['run', 'wf', '--inputs', '[1]'], { EASEL_API_KEY: 'k'.repeat(20) })).toMatchObject({ code: 2, stderr: expect.stringContaining('--inputs must be a JSON object') });
    expect(await run(['run', 'wf', '--turn', '2'], { EASEL_API_KEY: 'k'.repeat(20) })).toMatchObject({ code: 2, stderr: expect.stringContaining('--turn goes with --run-id') });
    expect(await run(['chat', 'wf', '--base-url', 'ftp://x'], { EASEL_API_KEY: 'k'.repeat(20) })).toMatchObject({ code: 2, stderr: expect.stringContaining('--base-url / EASEL_BASE_URL must be an http(s) URL') });
    expect(await run(['keys', 'create', '--scope', 'execute'], { EASEL_API_KEY: 'k'.repeat(20) })).toMatchObject({ code: 2, stderr: expect.stringContaining('an execute key needs --workflows') });
    expect(await run(['bogus'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command "bogus"') });
    expect(await run(['workflows', 'create', '-', '--key', 'k'.repeat(20)])).toMatchObject({ code: 2, stderr: expect.stringContaining('is not JSON') });
  });
});
