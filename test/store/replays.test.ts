/**
 * What a replay reads of a recorded run (lib/store/replays.ts `readRecordedTurns`), on DynamoDB
 * Local: each turn's request, response and calls, `sys.date`, and of its state only the
 * outputs asked for — a long one from its blob, read with the others.
 */
import { describe, expect, it } from 'vitest';
import type { CallRecord } from '../../lib/canvas/calls';
import { getTurn } from '../../lib/store/sessions';
import { readRecordedTurns } from '../../lib/store/replays';
import { executeTurn } from '../../lib/turns/execute';
import { graph } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { MemoryKnowledge } from '../helpers/knowledge';

describe('readRecordedTurns', () => {
  it('reads the turns with sys.date and the outputs asked for, a long one from its blob', async () => {
    // one chunk longer than a state keeps inline: the Retrieval's `json` output holds a blob reference
    const long = `The old bridge opened in 1932. ${'Its eight lanes carry the town across the river. '.repeat(200)}`;
    const knowledge = new MemoryKnowledge([{ id: 'kb', name: 'kb', documents: [{ name: 'bridge.md', chunks: [long] }] }]);
    const engine = testEngine({ knowledge });
    const tenant = newTenant();
    const wf = await newWorkflow(engine, tenant, graph({
      begin: ['Begin', { mode: 'conversational' }, ['Retrieval:Kb']],
      'Retrieval:Kb': ['Retrieval', { query: '{sys.query}', kb_ids: ['kb'], similarity_threshold: 0.05 }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{sys.date}: {Retrieval:Kb@formalized_content}'] }],
    }));
    const first = await executeTurn(engine, { tenant, workflowId: wf, runInput: { query: 'old bridge' } });
    const runId = first.response.run_id;
    await executeTurn(engine, { tenant, workflowId: wf, runId, runInput: { query: 'when did it open' } });

    const asked: unknown[] = [];
    const { turns, more } = await readRecordedTurns(engine.store, tenant, runId, 0, 20, (calls) => {
      asked.push(calls.records.map((r) => (r as CallRecord).kind));
      return [{ component: 'Retrieval:Kb', output: 'json' }, { component: 'Message:Missing', output: 'content' }, { component: 'Retrieval:Kb', output: 'none' }];
    });
    expect(more).toBe(false);
    expect(turns.map((t) => t.turn)).toEqual([1, 2]);
    // told each turn's calls, to name what it wants
    expect(asked).toEqual([['retrieval'], ['retrieval']]);
    for (const t of turns) {
      const stored = await getTurn(engine.store, tenant, runId, t.turn);
      expect(t.response).toBe(stored?.response);
      expect(t.calls).toEqual(stored?.calls);
      expect(t.date).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
      expect(JSON.parse(t.response).events.find((e: { event: string }) => e.event === 'message')?.data.content).toContain(`${t.date}: `);
      // only what exists of what was asked
      expect(Object.keys(t.outputs)).toEqual(['Retrieval:Kb']);
      expect(Object.keys(t.outputs['Retrieval:Kb'] ?? {})).toEqual(['json']);
    }
    const chunks = turns[0]?.outputs['Retrieval:Kb']?.json as { content_with_weight: string }[];
    expect(chunks.map((c) => c.content_with_weight)).toEqual([long]);
  });
});
