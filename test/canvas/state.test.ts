import { describe, expect, it } from 'vitest';
import { Canvas, EaselError, InvalidRunInputError, STATE_VERSION, StateVersionError } from '../../lib/canvas';
import { canvasFor, fixture, turn } from '../helpers/canvas';

describe('serialized state', () => {
  it('carries its schema version and round-trips through JSON', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    const state = JSON.parse(JSON.stringify(canvas.serialize())) as Record<string, unknown>;
    expect(state.v).toBe(STATE_VERSION);
    expect(state.status).toBe('waiting_for_input');
    const restored = Canvas.restore(canvas.workflow, state);
    expect(restored.serialize()).toEqual(state);
  });

  it.each([
    ['not an object', 'nope'],
    ['an unknown version', { v: 99 }],
    ['a missing version', {}],
    ['a bad status', { v: 1, status: 'sleeping' }],
  ])('refuses %s with a typed error', (_label, raw) => {
    const canvas = canvasFor(fixture('form-intake'));
    expect(() => Canvas.restore(canvas.workflow, raw)).toThrow(StateVersionError);
  });

  it('refuses a state that names components the workflow does not have', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    const state = { ...canvas.serialize(), frontier: ['Message:Gone'] };
    expect(() => Canvas.restore(canvas.workflow, state)).toThrow(/Message:Gone/);
  });

  it('keeps a stored __proto__ key as an ordinary key', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    await turn(canvas, { query: 'hi' });
    const text = JSON.stringify(canvas.serialize()).replace('"globals":{', '"globals":{"__proto__":{"polluted":true},');
    const restored = Canvas.restore(canvas.workflow, JSON.parse(text));
    const globals = restored.serialize().globals;
    expect(Object.getPrototypeOf(globals)).toBeNull();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('refuses a second turn while one is running, and malformed run input', async () => {
    const canvas = canvasFor(fixture('form-intake'));
    const running = canvas.run({ query: 'hi' });
    await running.next();
    await expect(turn(canvas, { query: 'again' })).rejects.toMatchObject({ code: 'turn_in_progress' });
    expect(() => canvas.serialize()).toThrow(EaselError);
    for await (const _ of running) {
      // finish the first turn
    }
    await expect(turn(canvas, { query: 42 as unknown as string })).rejects.toBeInstanceOf(InvalidRunInputError);
    await expect(turn(canvas, { inputs: [] as unknown as Record<string, unknown> })).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });

  it('resets to not_started with the DSL variables back at their defaults', async () => {
    const dsl = { ...fixture('form-intake'), variables: { tone: { name: 'tone', type: 'string', value: 'warm' } } };
    const canvas = canvasFor(dsl);
    await turn(canvas, { query: 'hi' });
    canvas.reset();
    const state = canvas.serialize();
    expect(state.status).toBe('not_started');
    expect(state.history).toEqual([]);
    expect(state.globals['env.tone']).toBe('warm');
    expect(state.globals['sys.query']).toBe('');
  });
});
