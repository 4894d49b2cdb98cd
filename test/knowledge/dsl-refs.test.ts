import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { knowledgeRefsByComponent, knowledgeRefsOf } from '../../lib/knowledge/dsl-refs';

const CORPUS = resolve(fileURLToPath(new URL('../..', import.meta.url)), process.env.EASEL_RAGFLOW_CORPUS ?? '../shared/ragflow');
const TEMPLATE = join(CORPUS, 'agent', 'templates', 'smart_customer_service_specialist.json');

const node = (component_name: string, params: Record<string, unknown>) => ({ obj: { component_name, params }, downstream: [], upstream: [] });

describe('knowledgeRefsOf', () => {
  it('takes Retrieval components’ dataset_ids, else their kb_ids, in DSL order, each once', () => {
    const dsl = {
      components: {
        begin: node('Begin', {}),
        'Retrieval:A': node('Retrieval', { dataset_ids: ['kb-1', 'kb-2'], kb_ids: ['ignored-when-dataset-ids'] }),
        'Retrieval:B': node('Retrieval', { dataset_ids: [], kb_ids: ['kb-3', 'kb-1'] }),
        'Retrieval:C': node('Retrieval', { kb_ids: 'Handbook' }),
        'Message:D': node('Message', { content: ['kb-9'] }),
      },
    };
    expect(knowledgeRefsOf(dsl)).toEqual(['kb-1', 'kb-2', 'kb-3', 'Handbook']);
    expect(knowledgeRefsByComponent(dsl)).toEqual([
      { component_id: 'Retrieval:A', ids: ['kb-1', 'kb-2'] },
      { component_id: 'Retrieval:B', ids: ['kb-3', 'kb-1'] },
      { component_id: 'Retrieval:C', ids: ['Handbook'] },
    ]);
  });

  it('takes the Retrieval tools of Agents and of their sub-Agents, under the top Agent', () => {
    const dsl = {
      components: {
        'Agent:Top': node('Agent', {
          tools: [
            { component_name: 'Retrieval', params: { kb_ids: ['manuals'] } },
            { component_name: 'TavilySearch', params: { kb_ids: ['not-a-retrieval'] } },
            { component_name: 'Agent', params: { tools: [{ component_name: 'Retrieval', params: { dataset_ids: ['faq', 'manuals'] } }] } },
          ],
        }),
      },
    };
    expect(knowledgeRefsByComponent(dsl)).toEqual([{ component_id: 'Agent:Top', ids: ['manuals', 'faq'] }]);
  });

  it('skips references, blanks and anything that is not a DSL', () => {
    const dsl = { components: { r: node('Retrieval', { kb_ids: ['begin@kb', '{sys.query}', '  ', 'kept ', 7, null] }) } };
    expect(knowledgeRefsOf(dsl)).toEqual(['kept']);
    for (const junk of [null, 'dsl', [], { components: [] }, { components: { x: null, y: { obj: 'no' } } }]) expect(knowledgeRefsOf(junk)).toEqual([]);
  });

  // the corpus is RAGFlow's (test/conformance says where it is found)
  it.skipIf(!existsSync(TEMPLATE))('finds the dataset ids RAGFlow’s stock templates carry', () => {
    const template = JSON.parse(readFileSync(TEMPLATE, 'utf8')) as { dsl: unknown };
    expect(knowledgeRefsOf(template.dsl)).toEqual(['a5aaec4a819b11f095f1047c16ec874f', '65cb5150819b11f08347047c16ec874f']);
  });
});
