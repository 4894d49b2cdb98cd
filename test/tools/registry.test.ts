import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileWorkflow, DslValidationError } from '../../lib/canvas';
import { builtinComponents, withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { builtinTools, createToolRegistry, type ToolKind } from '../../lib/tools';

const lookup: ToolKind<{ table: string }> = {
  name: 'Lookup',
  params: z.object({ table: z.string().min(1) }),
  create: (entry) => ({
    name: entry.name,
    description: `Looks a key up in ${entry.params.table}.`,
    parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
    invoke: async () => ({ kind: 'result', content: 'found' }),
  }),
};

function agentDsl(tools: unknown[]) {
  return {
    components: {
      begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['Agent:A'], upstream: [] },
      'Agent:A': { obj: { component_name: 'Agent', params: { tools } }, downstream: [], upstream: ['begin'] },
    },
  };
}

function problemsOf(dsl: unknown, registry = builtinComponents) {
  try {
    compileWorkflow(dsl, registry);
  } catch (e) {
    if (e instanceof DslValidationError) return e.problems;
    throw e;
  }
  return [];
}

describe('tool registry', () => {
  it('finds kinds by the component_name of DSL tool entries, and lists them in order', () => {
    const other: ToolKind = { ...lookup, name: 'Other' } as ToolKind;
    const registry = createToolRegistry([lookup, other]);
    expect(registry.kind('Lookup')).toBe(lookup);
    expect(registry.kind('Other')).toBe(other);
    expect(registry.kind('Missing')).toBeUndefined();
    expect(registry.kinds).toEqual(['Lookup', 'Other']);
  });

  it('keeps "Agent" for sub-Agents', () => {
    expect(() => createToolRegistry([{ ...lookup, name: 'Agent' } as ToolKind])).toThrow(/sub-Agents/);
  });

  it('ships Retrieval and the web tools besides sub-Agents', () => {
    expect(builtinTools.kinds).toEqual(['Retrieval', 'TavilySearch', 'TavilyExtract', 'Google', 'SearXNG', 'GitHub', 'Wikipedia', 'ArXiv', 'PubMed', 'Crawler', 'Email']);
  });
});

describe('Agent built on a registry', () => {
  const components = withComponents(createAgent(createToolRegistry([lookup])));

  it('accepts entries of the registry kinds and of sub-Agents, params validated by the kind', () => {
    const dsl = agentDsl([
      { component_name: 'Lookup', name: 'capitals', params: { table: 'capitals' } },
      { component_name: 'Agent', name: 'helper', params: { tools: [{ component_name: 'Lookup', name: 'nested', params: { table: 't' } }] } },
    ]);
    expect(problemsOf(dsl, components)).toEqual([]);
    const node = compileWorkflow(dsl, components).node('Agent:A');
    expect((node.params as { tools: { params: unknown }[] }).tools[0]?.params).toEqual({ table: 'capitals' });
  });

  it('reports bad params of a kind at load time, with their path', () => {
    const problems = problemsOf(agentDsl([{ component_name: 'Lookup', name: 'capitals', params: { table: '' } }]), components);
    expect(problems).toEqual([expect.objectContaining({ component_id: 'Agent:A', field: 'obj.params.tools.0.params.table' })]);
  });

  it('reports bad params of a sub-Agent as before', () => {
    const problems = problemsOf(agentDsl([{ component_name: 'Agent', name: 'helper', params: { max_rounds: 99 } }]), components);
    expect(problems).toEqual([expect.objectContaining({ component_id: 'Agent:A', field: 'obj.params.tools.0.params.max_rounds' })]);
  });

  it('refuses kinds it does not have, naming the ones it supports, also inside sub-Agents', () => {
    const problems = problemsOf(agentDsl([{ component_name: 'Agent', name: 'helper', params: { tools: [{ component_name: 'TavilySearch', name: 's', params: {} }] } }]), components);
    expect(problems).toEqual([
      expect.objectContaining({
        component_id: 'Agent:A',
        field: 'obj.params.tools.0.params.tools',
        message: 'unsupported tool kinds: TavilySearch (supported: Agent, Lookup).',
      }),
    ]);
  });

  it('the built-in Agent does not know the kind', () => {
    const problems = problemsOf(agentDsl([{ component_name: 'Lookup', name: 'capitals', params: { table: 'capitals' } }]));
    expect(problems).toEqual([expect.objectContaining({ message: `unsupported tool kinds: Lookup (supported: Agent, ${builtinTools.kinds.join(', ')}).` })]);
  });
});
