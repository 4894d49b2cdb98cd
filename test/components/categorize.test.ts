import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pickCategory } from '../../lib/components/categorize';
import { canvasFor, fixture, messages, turn } from '../helpers/canvas';
import { testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';

describe('Categorize triage', () => {
  it.each([
    ['I was billed twice, please check my billing', 'Routing you to billing (billing).'],
    ['my shipping is late', 'Routing you to shipping (shipping).'],
    ['hello there', 'A person will read this (other).'],
  ])('on the echo model, %j -> %s', async (query, expected) => {
    const canvas = canvasFor(fixture('triage-categorize'), { services: testServices() });
    const events = await turn(canvas, { query });
    expect(messages(events)).toEqual([expected]);
    const routed = events.find((e) => e.event === 'node_finished' && e.data.component_type === 'Categorize');
    expect(routed?.event === 'node_finished' && routed.data.outputs._next).toHaveLength(1);
  });

  describe('against a model server', () => {
    let server: OpenAiServer;
    beforeAll(async () => {
      server = await OpenAiServer.start();
    });
    afterAll(async () => {
      await server.close();
    });

    it('sends the categories, descriptions and examples, and routes on the answer', async () => {
      server.enqueue({ kind: 'text', text: 'Shipping' });
      const canvas = canvasFor(fixture('triage-categorize'), { services: testServices({ openaiUrl: server.url }) });
      const events = await turn(canvas, { query: 'it never arrived' });
      expect(messages(events)).toEqual(['Routing you to shipping (shipping).']);
      const [system, user] = server.requests.at(-1)?.body.messages ?? [];
      expect(system?.content).toContain(' - billing');
      expect(system?.content).toContain('shipping: Delivery times, tracking and lost parcels.');
      expect(system?.content).toContain('USER: "Where is my invoice?" -> billing');
      expect(user?.content).toContain('USER: "it never arrived"');
    });

    it('includes the previous exchange as context on the next turn', async () => {
      server.enqueue({ kind: 'text', text: 'billing' }, { kind: 'text', text: 'other' });
      const canvas = canvasFor(fixture('triage-categorize'), { services: testServices({ openaiUrl: server.url }) });
      await turn(canvas, { query: 'charged twice' });
      await turn(canvas, { query: 'thanks' });
      const user = server.requests.at(-1)?.body.messages[1]?.content ?? '';
      expect(user).toContain('ASSISTANT: "Routing you to billing (billing)."');
      expect(user).toContain('USER: "thanks"');
    });
  });
});

describe('pickCategory', () => {
  it.each([
    ['billing', ['billing', 'shipping'], 'billing'],
    ['BILLING or shipping, mostly shipping', ['billing', 'shipping'], 'shipping'],
    ['billing and shipping', ['billing', 'shipping'], 'billing'],
    ['no idea', ['billing', 'shipping', 'other'], 'other'],
    ['', ['a'], 'a'],
  ])('%j among %j -> %s', (answer, names, expected) => {
    expect(pickCategory(answer, names)).toBe(expected);
  });
});
