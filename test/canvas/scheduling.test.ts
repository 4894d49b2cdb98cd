import { describe, expect, it } from 'vitest';
import { withComponents } from '../../lib/components';
import { defineComponent } from '../../lib/canvas/component';
import { z } from 'zod';
import { canvasFor, last, messages, turn } from '../helpers/canvas';
import { graph, message } from '../helpers/dsl-builder';
import { streamer } from '../helpers/streamer';

function ran(events: Awaited<ReturnType<typeof turn>>): string[] {
  return events.filter((e) => e.event === 'node_started').map((e) => (e.event === 'node_started' ? e.data.component_id : ''));
}

describe('scheduling', () => {
  it('runs a join once, after its longer branch, with both branches done', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Message:A1', 'Message:B1']],
      'Message:A1': [...message('a1'), ['Message:Join']],
      'Message:B1': [...message('b1'), ['Message:B2']],
      'Message:B2': [...message('b2'), ['Message:B3']],
      'Message:B3': [...message('b3'), ['Message:Join']],
      'Message:Join': message('join: {Message:A1@content} {Message:B3@content}'),
    });
    const events = await turn(canvasFor(dsl), {});
    expect(ran(events)).toEqual(['begin', 'Message:A1', 'Message:B1', 'Message:B2', 'Message:B3', 'Message:Join']);
    expect(messages(events).at(-1)).toBe('join: a1 b3');
  });

  it('runs a join after a Switch once, from the branch taken', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Switch:S']],
      'Switch:S': [
        'Switch',
        {
          conditions: [{ logical_operator: 'and', items: [{ cpn_id: 'sys.query', operator: '=', value: 'left' }], to: ['Message:L'] }],
          end_cpn_ids: ['Message:R1'],
        },
        ['Message:L', 'Message:R1'],
      ],
      'Message:L': [...message('left'), ['Message:Join']],
      'Message:R1': [...message('right 1'), ['Message:R2']],
      'Message:R2': [...message('right 2'), ['Message:Join']],
      'Message:Join': message('joined'),
    });
    expect(messages(await turn(canvasFor(dsl), { query: 'left' }))).toEqual(['left', 'joined']);
    expect(messages(await turn(canvasFor(dsl), { query: 'other' }))).toEqual(['right 1', 'right 2', 'joined']);
  });

  it('runs the components of a batch concurrently', async () => {
    // each waits until the other has started: run one after the other, the first would wait for
    // good (and the test's timeout would end it), however fast or slow the machine
    const arrived = new Map<string, number>();
    const met = new Map<string, () => void>();
    const meeting = new Map<string, Promise<void>>();
    const rendezvous = defineComponent({
      name: 'Rendezvous',
      params: z.looseObject({ group: z.string() }),
      async invoke(p) {
        if (!meeting.has(p.group)) meeting.set(p.group, new Promise<void>((resolve) => met.set(p.group, resolve)));
        arrived.set(p.group, (arrived.get(p.group) ?? 0) + 1);
        if ((arrived.get(p.group) ?? 0) >= 2) met.get(p.group)?.();
        await meeting.get(p.group);
        return { outputs: { met: true } };
      },
    });
    const dsl = graph({
      begin: ['Begin', {}, ['Rendezvous:A', 'Rendezvous:B']],
      'Rendezvous:A': ['Rendezvous', { group: 'g' }, ['Message:End']],
      'Rendezvous:B': ['Rendezvous', { group: 'g' }, ['Message:End']],
      'Message:End': message('{Rendezvous:A@met} {Rendezvous:B@met}'),
    });
    const events = await turn(canvasFor(dsl, {}, withComponents(rendezvous)), {});
    expect(messages(events)).toEqual(['true true']);
  });

  it('emits each node’s events in frontier order whatever finishes first', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Streamer:Slow', 'Streamer:Fast']],
      'Streamer:Slow': ['Streamer', { text: 'slow slow slow', chunk: 1 }, ['Message:Slow']],
      'Streamer:Fast': ['Streamer', { text: 'fast', chunk: 4 }, ['Message:Fast']],
      'Message:Slow': message('{Streamer:Slow@content}'),
      'Message:Fast': message('{Streamer:Fast@content}'),
    });
    const events = await turn(canvasFor(dsl, {}, withComponents(streamer)), {});
    expect(messages(events)).toEqual(['slow slow slow', 'fast']);
    const ends = events.filter((e) => e.event === 'message_end').length;
    expect(ends).toBe(2);
  });

  it('does not deadlock when scheduled nodes sit on one cycle', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Message:A', 'Message:B']],
      'Message:A': [...message('a'), ['Message:B']],
      'Message:B': [...message('b'), ['Switch:Again']],
      'Switch:Again': [
        'Switch',
        {
          conditions: [{ logical_operator: 'and', items: [{ cpn_id: 'env.n', operator: '<', value: '2' }], to: ['VariableAssigner:Inc'] }],
          end_cpn_ids: ['Message:End'],
        },
        ['VariableAssigner:Inc', 'Message:End'],
      ],
      'VariableAssigner:Inc': ['VariableAssigner', { variables: [{ variable: 'env.n', operator: '+=', parameter: 1 }] }, ['Message:A']],
      'Message:End': message('end {env.n}'),
    }, { variables: { n: { name: 'n', type: 'number', value: 0 } } });
    const events = await turn(canvasFor(dsl), {});
    expect(last(events).event).toBe('workflow_finished');
    expect(messages(events).at(-1)).toBe('end 2');
  });

  it('lets a registered component choose its successors without the engine knowing it', async () => {
    const coin = defineComponent({
      name: 'Coin',
      params: z.looseObject({ heads: z.string(), tails: z.string() }),
      branchTargets: (p) => [p.heads, p.tails],
      invoke: (p, ctx) => {
        const side = ctx.random() < 0.5 ? 'heads' : 'tails';
        return { outputs: { side }, next: [side === 'heads' ? p.heads : p.tails] };
      },
    });
    const dsl = graph({
      begin: ['Begin', {}, ['Coin:C']],
      'Coin:C': ['Coin', { heads: 'Message:H', tails: 'Message:T' }, ['Message:H', 'Message:T']],
      'Message:H': message('heads {Coin:C@side}'),
      'Message:T': message('tails {Coin:C@side}'),
    });
    const seen = new Set<string>();
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const shown = messages(await turn(canvasFor(dsl, { seed }, withComponents(coin)), {}));
      expect(shown).toHaveLength(1);
      expect(shown[0]).toMatch(/^(heads heads|tails tails)$/);
      seen.add(shown[0] as string);
    }
    expect(seen.size).toBe(2);
  });
});
