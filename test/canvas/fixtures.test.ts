import { describe, expect, it } from 'vitest';
import { Canvas, InvalidInputsError, NotWaitingForInputError, RunFinishedError } from '../../lib/canvas';
import { canvasFor, fixture, last, messages, names, turn } from '../helpers/canvas';

const FORM = 'UserFillUp:PlumDesksWave';

describe('form intake -> templated message', () => {
  it('pauses at the form with its fields and rendered tips, then finishes with the answers', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    expect(canvas.prologue).toBe("Hello! Let's get you registered.");

    const first = await turn(canvas, { query: 'sign me up' });
    expect(names(first)).toEqual(['workflow_started', 'node_started', 'node_finished', 'user_inputs']);
    expect(canvas.status).toBe('waiting_for_input');
    const pause = last(first);
    expect(pause.event).toBe('user_inputs');
    if (pause.event !== 'user_inputs') return;
    expect(pause.data.tips).toBe('Tell us about yourself (you said: sign me up)');
    // the optional file field counts as satisfied; other optional fields are asked once
    expect(Object.keys(pause.data.inputs)).toEqual(['name', 'age', 'plan', 'newsletter', 'profile']);
    expect(pause.data.inputs.plan).toMatchObject({ name: 'Plan', type: 'options', options: ['free', 'pro'] });
    expect(canvas.prompt?.component_ids).toEqual([FORM]);
    expect(canvas.frontier).toEqual([FORM]);

    const second = await turn(canvas, {
      inputs: {
        name: 'Ada Lovelace',
        age: { type: 'integer', value: '36' },
        plan: 'pro',
        profile: '{"city": "London"}',
      },
    });
    expect(second[0]?.event).toBe('node_started'); // no workflow_started on resume
    expect(messages(second)).toEqual(['Welcome Ada Lovelace (36), plan pro; city London.']);
    expect(last(second)).toMatchObject({
      event: 'workflow_finished',
      data: { outputs: { content: 'Welcome Ada Lovelace (36), plan pro; city London.' } },
    });
    const formDone = second.find((e) => e.event === 'node_finished' && e.data.component_id === FORM);
    expect(formDone).toMatchObject({
      data: {
        component_name: 'Intake form',
        component_type: 'UserFillUp',
        outputs: { name: 'Ada Lovelace', age: 36, plan: 'pro', newsletter: null, profile: { city: 'London' } },
      },
    });
    expect(canvas.status).toBe('completed');
    expect(canvas.isTerminal).toBe(false); // conversational
  });

  it('keeps partial answers and asks again for the rest', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    const partial = await turn(canvas, { inputs: { name: 'Grace' } });
    expect(names(partial)).toEqual(['user_inputs']);
    const pause = last(partial);
    if (pause.event !== 'user_inputs') throw new Error('expected a pause');
    // once submitted, optional fields no longer hold the form
    expect(Object.keys(pause.data.inputs)).toEqual(['age', 'plan']);

    const rest = await turn(canvas, { inputs: { age: 85, plan: 'free' } });
    expect(messages(rest)).toEqual(['Welcome Grace (85), plan free; city .']);
  });

  it('clears stale values on an empty submission and asks the whole form again', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    await turn(canvas, { inputs: { name: 'Grace' } });
    const cleared = await turn(canvas, { inputs: {} });
    const pause = last(cleared);
    if (pause.event !== 'user_inputs') throw new Error('expected a pause');
    expect(Object.keys(pause.data.inputs)).toEqual(['name', 'age', 'plan', 'newsletter', 'profile']);
    expect(pause.data.inputs.name?.value).toBeNull();

    // an empty turn (no query, no inputs) does the same
    await turn(canvas, { inputs: { name: 'Grace' } });
    const empty = await turn(canvas, {});
    if (last(empty).event !== 'user_inputs') throw new Error('expected a pause');
    expect(canvas.serialize().nodes[FORM]?.form?.values).toEqual({});
  });

  it('records a query sent while waiting and asks the form again with values kept', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    await turn(canvas, { inputs: { name: 'Grace' } });
    const events = await turn(canvas, { query: 'what do you need?' });
    const pause = last(events);
    if (pause.event !== 'user_inputs') throw new Error('expected a pause');
    expect(pause.data.tips).toBe('Tell us about yourself (you said: what do you need?)');
    expect(Object.keys(pause.data.inputs)).toEqual(['age', 'plan']);
    const state = canvas.serialize();
    expect(state.history.at(-1)).toEqual(['user', 'what do you need?']);
    expect(state.globals['sys.query']).toBe('what do you need?');
  });

  it('refuses values of the wrong type with every bad field named, changing nothing', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    const before = JSON.stringify(canvas.serialize());
    const attempt = turn(canvas, {
      inputs: { name: 'Ok', age: 'forty', plan: 'enterprise', newsletter: 'maybe', profile: '{oops' },
    });
    await expect(attempt).rejects.toBeInstanceOf(InvalidInputsError);
    const error = (await attempt.catch((e: unknown) => e)) as InvalidInputsError;
    expect(error.code).toBe('invalid_inputs');
    expect(error.fields.map((f) => f.field)).toEqual(['age', 'plan', 'newsletter', 'profile']);
    expect(error.fields.every((f) => f.component_id === FORM)).toBe(true);
    expect(JSON.stringify(canvas.serialize())).toBe(before);
  });

  it('starts a new pass after completion in conversational mode, keeping history', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    await turn(canvas, { inputs: { name: 'A', age: 1, plan: 'free' } });
    const again = await turn(canvas, { query: 'once more' });
    expect(names(again).slice(0, 1)).toEqual(['workflow_started']);
    expect(last(again).event).toBe('user_inputs');
    const history = canvas.serialize().history;
    expect(history.map(([role]) => role)).toEqual(['user', 'assistant', 'user']);
    expect(canvas.serialize().globals['sys.conversation_turns']).toBe(2);
  });

  it('refuses inputs when the run is not waiting for any', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    await turn(canvas, { inputs: { name: 'A', age: 1, plan: 'free' } });
    await expect(turn(canvas, { inputs: { name: 'B' } })).rejects.toBeInstanceOf(NotWaitingForInputError);
  });
});

describe('Begin with required inputs (task mode)', () => {
  it('pauses on the first turn with Begin as the form when required inputs are missing', async () => {
    const canvas = canvasFor(fixture('begin-required'));
    const first = await turn(canvas, { inputs: { topic: 'billing' } });
    expect(names(first)).toEqual(['workflow_started', 'user_inputs']);
    const pause = last(first);
    if (pause.event !== 'user_inputs') throw new Error('expected a pause');
    expect(Object.keys(pause.data.inputs)).toEqual(['order']); // optional notes never hold Begin
    expect(pause.data.tips).toBe('Please fill in the form');

    const second = await turn(canvas, { inputs: { order: '1042' } });
    expect(messages(second)).toEqual(['Ticket for order 1042 about billing. Notes: ']);
    expect(canvas.status).toBe('completed');
    expect(canvas.isTerminal).toBe(true);
    await expect(turn(canvas, { query: 'again' })).rejects.toBeInstanceOf(RunFinishedError);
  });

  it('runs straight through when Begin inputs are complete on the first turn', async () => {
    const canvas = canvasFor(fixture('begin-required'));
    const events = await turn(canvas, { inputs: { topic: 'shipping', order: 7, notes: 'fragile' } });
    expect(messages(events)).toEqual(['Ticket for order 7 about shipping. Notes: fragile']);
    expect(last(events)).toMatchObject({
      event: 'workflow_finished',
      data: { inputs: { topic: 'shipping', order: 7, notes: 'fragile' } },
    });
  });

  it('refuses a stop after the run ended, and a stop on a live run cancels it', async () => {
    const canvas = canvasFor(fixture('begin-required'));
    await turn(canvas, {});
    const stopped: string[] = [];
    for await (const e of canvas.stop()) stopped.push(e.event);
    expect(stopped).toEqual(['workflow_cancelled']);
    expect(canvas.status).toBe('cancelled');
    expect(canvas.isTerminal).toBe(true);
    await expect(async () => {
      for await (const _ of canvas.stop()) {
        // never reached
      }
    }).rejects.toBeInstanceOf(RunFinishedError);
  });
});

describe('Switch with and/or conditions', () => {
  it.each([
    [{ score: 85, country: 'FR' }, 'hello', 'VIP lane for FR'],
    [{ score: 85, country: 'DE' }, 'hello', 'Standard queue (score 85)'],
    [{ score: 50, country: 'FR' }, 'this is urgent', 'Escalated: this is urgent'],
    [{ score: 5, country: 'FR' }, 'hello', 'Escalated: hello'],
    [{ score: '80', country: 'FR' }, 'hello', 'VIP lane for FR'],
  ])('inputs %j with query %j -> %s', async (inputs, query, expected) => {
    const canvas = canvasFor(fixture('switch-and-or'));
    const events = await turn(canvas, { query, inputs });
    expect(messages(events)).toEqual([expected]);
    const routed = events.find((e) => e.event === 'node_finished' && e.data.component_type === 'Switch');
    expect(routed?.event === 'node_finished' && routed.data.outputs._next).toHaveLength(1);
  });
});

describe('Iteration over a list', () => {
  it('runs the body once per item with item/index and collects outputs in order', async () => {
    const canvas = canvasFor(fixture('iteration'));
    const events = await turn(canvas, { inputs: { cities: ['Oslo', 'Lima', 'Pune'] } });
    expect(messages(events)).toEqual(['#0 Oslo', '#1 Lima', '#2 Pune', 'Visited: ["#0 Oslo","#1 Lima","#2 Pune"]']);
    const finished = events.filter((e) => e.event === 'node_finished').map((e) => e.data.component_id);
    // the Iteration finishes once, after its last round, before its downstream runs
    expect(finished.filter((id) => id === 'Iteration:WideHillsRoll')).toHaveLength(1);
    expect(finished.indexOf('Iteration:WideHillsRoll')).toBeLessThan(finished.indexOf('Message:Summary'));
  });

  it('handles an empty list and refuses a value that is not a list', async () => {
    const empty = canvasFor(fixture('iteration'));
    expect(messages(await turn(empty, { inputs: { cities: [] } }))).toEqual(['Visited: []']);

    const notList = canvasFor(fixture('iteration'));
    const events = await turn(notList, { inputs: { cities: { a: 1 } } });
    expect(last(events)).toMatchObject({
      event: 'workflow_failed',
      data: { error: { code: 'component_error', component_id: 'Iteration:WideHillsRoll' } },
    });
    expect(notList.status).toBe('failed');
  });
});

describe('Loop with ExitLoop', () => {
  it('exits at the ExitLoop before the termination condition and keeps loop variables', async () => {
    const canvas = canvasFor(fixture('loop-exit'));
    const events = await turn(canvas, {});
    expect(messages(events)).toEqual(['round 1', 'round 2', 'stopped at 3, seen [1,2,3]']);
    const loopDone = events.find((e) => e.event === 'node_finished' && e.data.component_id === 'Loop:BusyBeesHum');
    expect(loopDone).toMatchObject({ data: { outputs: { count: 3, seen: [1, 2, 3] } } });
  });

  it('stops at the termination condition or the round limit, whichever comes first', async () => {
    const dsl = fixture('loop-exit') as { components: Record<string, { obj: { params: Record<string, unknown> } }> };
    const sw = dsl.components['Switch:AtThree'];
    if (!sw) throw new Error('fixture changed');
    sw.obj.params.conditions = [
      { logical_operator: 'and', items: [{ cpn_id: 'Loop:BusyBeesHum@count', operator: '=', value: '99' }], to: ['ExitLoop:Out'] },
    ];
    expect(messages(await turn(canvasFor(dsl), {})).at(-1)).toBe('stopped at 10, seen [1,2,3,4,5,6,7,8,9,10]');

    const loop = dsl.components['Loop:BusyBeesHum'];
    if (!loop) throw new Error('fixture changed');
    loop.obj.params.maximum_loop_count = 4;
    expect(messages(await turn(canvasFor(dsl), {})).at(-1)).toBe('stopped at 4, seen [1,2,3,4]');
  });
});

describe('Loop containing a form', () => {
  it('asks the form every round and keeps the round count across pauses', async () => {
    let canvas = canvasFor(fixture('loop-with-form'));
    const tips: string[] = [];
    let events = await turn(canvas, {});
    for (const colour of ['red', 'green', 'blue']) {
      const pause = last(events);
      if (pause.event !== 'user_inputs') throw new Error('expected a pause');
      tips.push(pause.data.tips);
      // every pause goes through JSON into a new Canvas, as a real turn does
      canvas = Canvas.restore(canvas.workflow, JSON.parse(JSON.stringify(canvas.serialize())));
      events = await turn(canvas, { inputs: { colour } });
    }
    expect(tips).toEqual([0, 1, 2].map((i) => `Question ${i}: what is your favourite colour?`));
    expect(messages(events)).toEqual(['You said: ["red","green","blue"]']);
    expect(last(events).event).toBe('workflow_finished');
  });
});
