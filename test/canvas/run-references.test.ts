/**
 * The pass's references in the engine: added by components, carried by `message_end` and by
 * the turn's assistant history entries, bounded, kept across a pause, reset at the next pass,
 * and serialized exactly.
 */
import { describe, expect, it } from 'vitest';
import { Canvas, citationKey, compileWorkflow, MAX_REFERENCE_CHUNKS, StateVersionError } from '../../lib/canvas';
import { defineComponent } from '../../lib/canvas/component';
import { withComponents } from '../../lib/components';
import { z } from 'zod';
import { canvasFor, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';

/** Adds `count` chunks named `<prefix><i>` of one document, or the chunks it is given. */
const finder = defineComponent({
  name: 'Finder',
  params: z.looseObject({ prefix: z.string(), count: z.number().int(), doc: z.string().default('doc.md') }),
  invoke(p, ctx) {
    const chunks = Array.from({ length: p.count }, (_, i) => ({ id: `${p.prefix}${i}`, content: `text ${p.prefix}${i}`, document_name: p.doc }));
    ctx.addReference(chunks, [{ doc_name: p.doc, doc_id: `id-${p.doc}`, count: p.count }]);
    return { outputs: { found: p.count } };
  },
});
const registry = withComponents(finder);

function dsl(count = 2, prefix = 'c') {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Message:Before']],
    'Message:Before': ['Message', { content: ['looking'] }, ['Finder:F']],
    'Finder:F': ['Finder', { prefix, count }, ['UserFillUp:Ask']],
    'UserFillUp:Ask': ['UserFillUp', { inputs: { ok: { name: 'OK', type: 'line', optional: false } } }, ['Message:After']],
    'Message:After': ['Message', { content: ['found {Finder:F@found}, ok={UserFillUp:Ask@ok}'] }],
  });
}

const endsOf = (events: Awaited<ReturnType<typeof turn>>) => events.filter((e) => e.event === 'message_end').map((e) => e.data);

describe('run references', () => {
  it('go with every message_end after they were added, through a pause and a restore, and not before', async () => {
    const canvas = canvasFor(dsl(), {}, registry);
    const first = await turn(canvas, { query: 'find' });
    expect(endsOf(first)).toEqual([{}]);
    const saved = JSON.parse(JSON.stringify(canvas.serialize()));
    expect(Object.keys(saved.retrieval.chunks).sort()).toEqual([citationKey('c0'), citationKey('c1')].sort());

    const restored = Canvas.restore(compileWorkflow(dsl(), registry), saved);
    const second = await turn(restored, { inputs: { ok: 'yes' } });
    const reference = {
      chunks: {
        [citationKey('c0')]: { id: 'c0', content: 'text c0', document_name: 'doc.md' },
        [citationKey('c1')]: { id: 'c1', content: 'text c1', document_name: 'doc.md' },
      },
      doc_aggs: { 'doc.md': { doc_name: 'doc.md', doc_id: 'id-doc.md', count: 2 } },
    };
    expect(endsOf(second)).toEqual([{ reference }]);
    // the turn's history keeps them with the message; the state's history does not
    expect(restored.lastTurnHistory.at(-1)).toEqual(['assistant', 'found 2, ok=yes', reference]);
    expect(restored.serialize().history.every((h) => h.length === 2)).toBe(true);

    // a new pass starts without them
    const third = await turn(restored, { query: 'again' });
    expect(endsOf(third)).toEqual([{}]);
    expect(restored.serialize().retrieval).toBeDefined();
  });

  it('keep at most MAX_REFERENCE_CHUNKS chunks per pass; a chunk with the same citation id replaces the earlier', async () => {
    const added = MAX_REFERENCE_CHUNKS + 30;
    // more distinct citation ids than the bound, despite the collisions of a modulus of 500
    expect(new Set(Array.from({ length: added }, (_, i) => citationKey(`c${i}`))).size).toBeGreaterThan(MAX_REFERENCE_CHUNKS);
    const canvas = canvasFor(dsl(added), {}, registry);
    await turn(canvas, { query: 'find' });
    const kept = Object.values(canvas.serialize().retrieval?.chunks ?? {}).map((c) => c.id as string);
    expect(kept).toHaveLength(MAX_REFERENCE_CHUNKS);
    // the first ones are kept
    expect(kept).toContain('c0');

    let twin = 1;
    while (citationKey(`x${twin}`) !== citationKey('x0')) twin++;
    const collide = defineComponent({
      name: 'Finder',
      params: z.looseObject({}),
      invoke(_p, ctx) {
        ctx.addReference([{ id: 'x0', content: 'first' }], []);
        ctx.addReference([{ id: `x${twin}`, content: 'second' }], []);
        return {};
      },
    });
    const replaced = canvasFor(dsl(), {}, withComponents(collide));
    await turn(replaced, { query: 'find' });
    expect(replaced.serialize().retrieval?.chunks).toEqual({ [citationKey('x0')]: { id: `x${twin}`, content: 'second' } });
  });

  it('load from states written before them, and refuse a malformed one', () => {
    const workflow = compileWorkflow(dsl(), registry);
    const state = JSON.parse(JSON.stringify(canvasFor(dsl(), {}, registry).serialize()));
    expect(state.retrieval).toBeUndefined();
    expect(Canvas.restore(workflow, state).serialize().retrieval).toBeUndefined();
    expect(() => Canvas.restore(workflow, { ...state, retrieval: { chunks: [] } })).toThrow(StateVersionError);
    // history entries a turn stored with references come back as plain entries
    const restored = Canvas.restore(workflow, { ...state, history: [['user', 'q'], ['assistant', 'a', { chunks: {}, doc_aggs: {} }]] });
    expect(restored.serialize().history).toEqual([['user', 'q'], ['assistant', 'a']]);
  });
});
