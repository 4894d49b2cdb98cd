import { describe, expect, it } from 'vitest';
import { Canvas, EaselError, TransientError } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { canvasFor, last, messages, turn } from '../helpers/canvas';
import { streamer, streamerReads } from '../helpers/streamer';

const registry = withComponents(streamer);

function streamingDsl(streamerParams: Record<string, unknown>, messageParams: Record<string, unknown> = {}) {
  return {
    components: {
      begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['Streamer:S'], upstream: [] },
      'Streamer:S': {
        obj: { component_name: 'Streamer', params: { text: 'The answer to {sys.query} is 42.', chunk: 4, ...streamerParams } },
        downstream: ['Message:M'],
        upstream: ['begin'],
      },
      'Message:M': {
        obj: { component_name: 'Message', params: { content: ['Bot: {Streamer:S@content} (end)'], ...messageParams } },
        downstream: [],
        upstream: ['Streamer:S'],
      },
    },
  };
}

describe('a Message streaming an upstream producer', () => {
  it('passes deltas through as they arrive and reports the producer finished after the message', async () => {
    const canvas = canvasFor(streamingDsl({}), {}, registry);
    const events = await turn(canvas, { query: 'life' });
    const deltas = events.filter((e) => e.event === 'message').map((e) => (e.event === 'message' ? e.data.content : ''));
    expect(deltas).toEqual(['Bot: ', 'The ', 'answ', 'er t', 'o li', 'fe i', 's 42', '.', ' (end)']);
    expect(messages(events)).toEqual(['Bot: The answer to life is 42. (end)']);

    const order = events
      .filter((e) => e.event !== 'message')
      .map((e) => ('component_id' in e.data ? `${e.event}:${e.data.component_id}` : e.event));
    expect(order).toEqual([
      'workflow_started',
      'node_started:begin',
      'node_finished:begin',
      'node_started:Streamer:S',
      'node_started:Message:M',
      'message_end',
      'node_finished:Streamer:S',
      'node_finished:Message:M',
      'workflow_finished',
    ]);
    const producerDone = events.find((e) => e.event === 'node_finished' && e.data.component_id === 'Streamer:S');
    expect(producerDone).toMatchObject({ data: { outputs: { content: 'The answer to life is 42.' }, error: null } });
    // the state holds plain text, not the stream
    expect(canvas.serialize().nodes['Streamer:S']?.outputs?.content).toBe('The answer to life is 42.');
  });

  it('renders the whole text at once when the Message does not stream', async () => {
    const canvas = canvasFor(streamingDsl({}, { stream: false }), {}, registry);
    const events = await turn(canvas, { query: 'x' });
    expect(events.filter((e) => e.event === 'message')).toHaveLength(1);
    expect(messages(events)).toEqual(['Bot: The answer to x is 42. (end)']);
  });

  it('reads the producer once even when its output is used twice, and settles unread streams', async () => {
    const dsl = streamingDsl({});
    const message = dsl.components['Message:M'];
    message.obj.params.content = ['{Streamer:S@content} / {Streamer:S@content}'];
    const before = streamerReads.count;
    const events = await turn(canvasFor(dsl, {}, registry), { query: 'q' });
    expect(messages(events)).toEqual(['The answer to q is 42. / The answer to q is 42.']);
    expect(streamerReads.count - before).toBe(1);

    // nobody shows the stream: it is read to its end before the turn commits
    const unread = streamingDsl({});
    unread.components['Streamer:S'].downstream = [];
    unread.components['Message:M'].upstream = [];
    unread.components.begin.downstream = ['Streamer:S', 'Message:M'];
    unread.components['Message:M'].obj.params.content = ['static'];
    const canvas = canvasFor(unread, {}, registry);
    const ends = await turn(canvas, { query: 'q' });
    expect(last(ends).event).toBe('workflow_finished');
    expect(canvas.serialize().nodes['Streamer:S']?.outputs?.content).toBe('The answer to q is 42.');
  });

  it('fails the run when the stream breaks with a workflow error', async () => {
    const canvas = canvasFor(streamingDsl({ fail_after: 2 }), {}, registry);
    const events = await turn(canvas, { query: 'q' });
    expect(last(events)).toMatchObject({
      event: 'workflow_failed',
      data: { error: { code: 'component_error', message: 'the stream broke', component_id: 'Message:M' } },
    });
    expect(canvas.status).toBe('failed');
  });

  it('throws a transient failure out of run(), leaving the saved state as the way back', async () => {
    const dsl = streamingDsl({ fail_after: 1, transient: true });
    const canvas = canvasFor(dsl, {}, registry);
    const saved = JSON.parse(JSON.stringify(canvas.serialize())) as unknown;
    const seen: string[] = [];
    await expect(async () => {
      for await (const e of canvas.run({ query: 'q' })) seen.push(e.event);
    }).rejects.toBeInstanceOf(TransientError);
    expect(seen).toContain('message'); // some deltas went out before the failure
    expect(() => canvas.serialize()).toThrow(EaselError);
    await expect(turn(canvas, { query: 'again' })).rejects.toMatchObject({ code: 'invalid_state' });

    const again = Canvas.restore(canvas.workflow, saved);
    expect(again.status).toBe('not_started');
  });
});
