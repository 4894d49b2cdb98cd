import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pickCategory } from '../../lib/components/categorize';
import { canvasFor, fixture, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
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
      expect(system?.content).toContain('Category: shipping\nDescription: Delivery times, tracking and lost parcels.');
      expect(system?.content).toContain('USER: "Where is my invoice?" → billing');
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

    it("sends RAGFlow's two messages: the classification prompt, then the conversation to complete", async () => {
      server.enqueue({ kind: 'text', text: 'billing' });
      const canvas = canvasFor(fixture('triage-categorize'), { services: testServices({ openaiUrl: server.url }) });
      await turn(canvas, { query: 'my card\nwas charged' });
      const sent = server.requests.at(-1)?.body.messages ?? [];
      expect(sent.map((m) => m.role)).toEqual(['system', 'user']);
      const system = sent[0]?.content ?? '';
      const sections = [
        ' - billing\n - shipping\n - other\n',
        '------\nCategory: billing\nDescription: Invoices, charges, refunds and payment methods.\n' +
          '------\nCategory: shipping\nDescription: Delivery times, tracking and lost parcels.\n' +
          '------\nCategory: other\nDescription: Anything else.\n',
        '---- Instructions ----\n',
        '---- Examples ----\nUSER: "I was charged twice" → billing\nUSER: "Where is my invoice?" → billing\nUSER: "Where is my parcel?" → shipping',
      ];
      const at = sections.map((section) => system.indexOf(section));
      expect(at.every((i) => i >= 0)).toBe(true);
      expect([...at].sort((a, b) => a - b)).toEqual(at);
      expect(system.endsWith('USER: "Where is my parcel?" → shipping')).toBe(true);
      // the query, on one line, in the examples' form, for the model to complete
      expect(sent[1]?.content).toBe('---- Real Data ----\nUSER: "my card was charged" →');
    });

    /** begin -> Categorize with `params` -> one Message per category. */
    function categorizer(params: Record<string, unknown>, variables: Record<string, unknown> = {}) {
      return graph(
        {
          begin: ['Begin', { mode: 'conversational' }, ['Categorize:C']],
          'Categorize:C': ['Categorize', {
            llm_id: 'qwen-turbo@Tongyi-Qianwen',
            category_description: { yes: { to: ['Message:Yes'] }, no: { to: ['Message:No'] } },
            ...params,
          }, ['Message:Yes', 'Message:No']],
          'Message:Yes': ['Message', { content: ['said yes'] }],
          'Message:No': ['Message', { content: ['said no'] }],
        },
        { variables: Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, { name, type: 'string', value }])) },
      );
    }

    it('replaces a sys_prompt in the DSL with the classification prompt, as RAGFlow does, and leaves out empty sections', async () => {
      server.enqueue({ kind: 'text', text: 'yes' });
      const canvas = canvasFor(categorizer({ sys_prompt: 'You are a pirate.' }), { services: testServices({ openaiUrl: server.url }) });
      expect(messages(await turn(canvas, { query: 'sure' }))).toEqual(['said yes']);
      const system = server.requests.at(-1)?.body.messages[0]?.content ?? '';
      expect(system).not.toContain('pirate');
      expect(system).toContain(' - yes\n - no\n');
      expect(system).not.toContain('Category:');
      expect(system).not.toContain('---- Examples ----');
    });

    it.each([
      [0, ['---- Real Data ----\nUSER: "third" →']],
      [1, ['---- Real Data ----\nASSISTANT: "said no" | USER: "third" →']],
      [2, ['---- Real Data ----\nASSISTANT: "said yes" | USER: "second" | ASSISTANT: "said no" | USER: "third" →']],
      [5, ['---- Real Data ----\nUSER: "first" | ASSISTANT: "said yes" | USER: "second" | ASSISTANT: "said no" | USER: "third" →']],
    ])('with a window of %i, sends that many pairs of messages, the query last (as RAGFlow)', async (window, expected) => {
      server.enqueue({ kind: 'text', text: 'yes' }, { kind: 'text', text: 'no' }, { kind: 'text', text: 'yes' });
      const canvas = canvasFor(categorizer({ message_history_window_size: window }), { services: testServices({ openaiUrl: server.url }) });
      for (const query of ['first', 'second', 'third']) expect(last(await turn(canvas, { query })).event).toBe('workflow_finished');
      expect(server.requests.slice(-1).map((r) => r.body.messages[1]?.content)).toEqual(expected);
    });

    it('puts the value of `query` in place of the latest user message', async () => {
      server.enqueue({ kind: 'text', text: 'no' });
      const canvas = canvasFor(categorizer({ query: 'env.review', message_history_window_size: 1 }, { review: 'the parcel\nwas torn' }), {
        services: testServices({ openaiUrl: server.url }),
      });
      await turn(canvas, { query: 'hello' });
      expect(server.requests.at(-1)?.body.messages[1]?.content).toBe('---- Real Data ----\nUSER: "the parcel was torn" →');
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
