/**
 * Generates RAGFlow DSLs for property tests: chains of blocks (messages, forms, variable
 * writes, Switch branches, parallel forks that join, Loops with an optional ExitLoop,
 * Iterations, and Retrievals, shown or cited by an LLM), nested up to a small depth, so that
 * forms end up inside loops and iterations.
 */
import fc from 'fast-check';
import { MemoryKnowledge } from './knowledge';

export type FieldKind = 'line' | 'integer' | 'boolean' | 'options' | 'object' | 'float';

export interface FieldSpec {
  kind: FieldKind;
  optional: boolean;
}

export type Block =
  | { kind: 'message'; variants: number; stream: boolean }
  | { kind: 'form'; fields: FieldSpec[] }
  | { kind: 'assign'; add: number }
  | { kind: 'switch'; threshold: number; left: Block[]; right: Block[] }
  | { kind: 'parallel'; a: Block[]; b: Block[] }
  | { kind: 'loop'; max: number; exitAt: number | null; body: Block[] }
  | { kind: 'iteration'; items: number; body: Block[] }
  | { kind: 'aggregate' }
  | { kind: 'stream'; chunk: number }
  | { kind: 'llm'; shown: boolean }
  | { kind: 'categorize'; left: Block[]; right: Block[] }
  | { kind: 'retrieval'; cite: boolean; byName: boolean; top: number }
  | { kind: 'risky'; method: 'none' | 'comment' | 'goto' };

export interface WorkflowSpec {
  mode: 'conversational' | 'task';
  beginRequired: boolean;
  blocks: Block[];
}

const fieldArb: fc.Arbitrary<FieldSpec> = fc.record({
  kind: fc.constantFrom<FieldKind>('line', 'integer', 'boolean', 'options', 'object', 'float'),
  optional: fc.boolean(),
});

function blocksArb(depth: number): fc.Arbitrary<Block[]> {
  const leaf: fc.Arbitrary<Block>[] = [
    fc.record({ kind: fc.constant('message' as const), variants: fc.integer({ min: 1, max: 3 }), stream: fc.boolean() }),
    fc.record({ kind: fc.constant('form' as const), fields: fc.array(fieldArb, { maxLength: 3 }) }),
    fc.record({ kind: fc.constant('assign' as const), add: fc.integer({ min: 1, max: 3 }) }),
    fc.constant({ kind: 'aggregate' as const }),
    fc.record({ kind: fc.constant('stream' as const), chunk: fc.integer({ min: 1, max: 8 }) }),
    fc.record({ kind: fc.constant('llm' as const), shown: fc.boolean() }),
    fc.record({ kind: fc.constant('risky' as const), method: fc.constantFrom<'none' | 'comment' | 'goto'>('none', 'comment', 'goto') }),
    fc.record({ kind: fc.constant('retrieval' as const), cite: fc.boolean(), byName: fc.boolean(), top: fc.integer({ min: 1, max: 4 }) }),
  ];
  if (depth <= 0) return fc.array(fc.oneof(...leaf), { minLength: 1, maxLength: 3 });
  const inner = blocksArb(depth - 1);
  const nested: fc.Arbitrary<Block>[] = [
    fc.record({ kind: fc.constant('switch' as const), threshold: fc.integer({ min: 0, max: 6 }), left: inner, right: inner }),
    fc.record({ kind: fc.constant('parallel' as const), a: inner, b: inner }),
    fc.record({ kind: fc.constant('categorize' as const), left: inner, right: inner }),
    fc.record({
      kind: fc.constant('loop' as const),
      max: fc.integer({ min: 1, max: 3 }),
      exitAt: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
      body: inner,
    }),
    fc.record({ kind: fc.constant('iteration' as const), items: fc.integer({ min: 0, max: 3 }), body: inner }),
  ];
  return fc.array(fc.oneof({ weight: 3, arbitrary: fc.oneof(...leaf) }, { weight: 2, arbitrary: fc.oneof(...nested) }), {
    minLength: 1,
    maxLength: 4,
  });
}

export const workflowSpecArb: fc.Arbitrary<WorkflowSpec> = fc.record({
  mode: fc.constantFrom<'conversational' | 'task'>('conversational', 'task'),
  beginRequired: fc.boolean(),
  blocks: blocksArb(2),
});

interface Component {
  obj: { component_name: string; params: Record<string, unknown> };
  downstream: string[];
  upstream: string[];
  parent_id?: string;
}

/** Builds the DSL. Every form has an integer field `n`, copied into `env.counter` after it. */
export function buildDsl(spec: WorkflowSpec): Record<string, unknown> {
  const components: Record<string, Component> = {};
  let seq = 0;
  const lastForm: string[] = [];
  const add = (name: string, params: Record<string, unknown>, parent?: string): string => {
    const id = `${name}:N${seq++}`;
    components[id] = { obj: { component_name: name, params }, downstream: [], upstream: [], ...(parent ? { parent_id: parent } : {}) };
    return id;
  };
  const link = (from: readonly string[], to: string) => {
    for (const f of from) {
      const c = components[f] as Component;
      if (!c.downstream.includes(to)) c.downstream.push(to);
      (components[to] as Component).upstream.push(f);
    }
  };

  /** Appends `blocks` after `tails`; returns the new tails. */
  const chain = (blocks: readonly Block[], tails: string[], parent: string | undefined, inIteration: boolean): string[] => {
    let current = tails;
    for (const block of blocks) current = emit(block, current, parent, inIteration);
    return current;
  };

  const emit = (block: Block, tails: string[], parent: string | undefined, inIteration: boolean): string[] => {
    switch (block.kind) {
      case 'message': {
        const scopeRef = inIteration ? ' item={item} index={index}' : '';
        const formRef = lastForm.length > 0 ? ` n={${lastForm.at(-1)}@n}` : '';
        const content = Array.from({ length: block.variants }, (_, v) => `m${seq}.${v} q={sys.query} c={env.counter}${scopeRef}${formRef}`);
        const id = add('Message', { content, stream: block.stream }, parent);
        link(tails, id);
        return [id];
      }
      case 'form': {
        const inputs: Record<string, unknown> = { n: { name: 'N', type: 'integer', optional: false } };
        const formNumber = seq;
        block.fields.forEach((f, i) => {
          // keys unique per form: two forms pending at once share one inputs object
          inputs[`f${formNumber}_${i}`] = {
            name: `Field ${i}`,
            type: f.kind,
            optional: f.optional,
            ...(f.kind === 'options' ? { options: ['a', 'b', 'c'] } : {}),
          };
        });
        const form = add('UserFillUp', { enable_tips: true, tips: `counter is {env.counter}`, inputs }, parent);
        link(tails, form);
        lastForm.push(form);
        const copy = add('VariableAssigner', { variables: [{ variable: 'env.counter', operator: 'overwrite', parameter: `${form}@n` }] }, parent);
        link([form], copy);
        return [copy];
      }
      case 'assign': {
        const id = add('VariableAssigner', { variables: [{ variable: 'env.counter', operator: '+=', parameter: block.add }, { variable: 'env.trail', operator: 'append', parameter: 'env.counter' }] }, parent);
        link(tails, id);
        return [id];
      }
      case 'aggregate': {
        const sources = ['env.missing', ...(lastForm.length > 0 ? [`${lastForm.at(-1)}@n`] : []), 'env.counter'];
        const id = add('VariableAggregator', { groups: [{ group_name: 'picked', variables: sources.map((value) => ({ value })) }] }, parent);
        link(tails, id);
        return [id];
      }
      case 'stream': {
        // a streaming producer shown live by a Message, as an LLM feeding a Message
        const producer = add('Streamer', { text: `streamed c={env.counter} q={sys.query}`, chunk: block.chunk }, parent);
        link(tails, producer);
        const shown = add('Message', { content: [`>> {${producer}@content} <<`] }, parent);
        link([producer], shown);
        return [shown];
      }
      case 'llm': {
        // shown: streamed live into a Message; otherwise called eagerly and kept in a variable
        const model = add('LLM', { llm_id: 'any@Provider', sys_prompt: 'Be brief. c={env.counter}', prompts: [{ role: 'user', content: 'q={sys.query} c={env.counter}' }], message_history_window_size: 2 }, parent);
        link(tails, model);
        const next = block.shown
          ? add('Message', { content: [`llm says: {${model}@content}`] }, parent)
          : add('VariableAssigner', { variables: [{ variable: 'env.said', operator: 'overwrite', parameter: `${model}@content` }] }, parent);
        link([model], next);
        return [next];
      }
      case 'retrieval': {
        // the query changes with the conversation and the counter, so what it finds does too
        const search = add('Retrieval', {
          query: 'q={sys.query} c={env.counter}',
          kb_ids: [block.byName ? GENERATED_KB.name : GENERATED_KB.id],
          top_n: block.top,
          similarity_threshold: 0.05,
          empty_response: 'nothing found',
        }, parent);
        link(tails, search);
        if (!block.cite) {
          const shown = add('Message', { content: [`found: {${search}@formalized_content}`] }, parent);
          link([search], shown);
          return [shown];
        }
        // called at once (its exception method makes it so), never a stream left unread: a
        // Message after a branch longer than its sibling may not run before a loop's next round
        const model = add('LLM', {
          llm_id: 'any@Provider',
          sys_prompt: 'Answer with citations.',
          prompts: [{ role: 'user', content: `knowledge: {${search}@formalized_content} q={sys.query}` }],
          message_history_window_size: 2,
          exception_method: 'comment',
          exception_default_value: 'no answer',
        }, parent);
        link([search], model);
        const shown = add('Message', { content: [`cited: {${model}@content}`] }, parent);
        link([model], shown);
        return [shown];
      }
      case 'categorize': {
        const cat = add('Categorize', { llm_id: '', category_description: {}, query: 'sys.query' }, parent);
        link(tails, cat);
        const left = branch(block.left, parent, inIteration);
        const right = branch(block.right, parent, inIteration);
        (components[cat] as Component).obj.params.category_description = {
          alpha: { description: 'even', examples: ['two'], to: [left.first] },
          beta: { description: 'odd', examples: ['one'], to: [right.first] },
        };
        link([cat], left.first);
        link([cat], right.first);
        return [...left.tails, ...right.tails];
      }
      case 'risky': {
        // appending to a number fails; the exception method decides what happens next
        const params: Record<string, unknown> = {
          variables: [{ variable: 'env.counter', operator: 'append', parameter: 'env.trail' }],
          exception_method: block.method === 'none' ? null : block.method,
        };
        if (block.method === 'comment') params.exception_default_value = 'fallback';
        const risky = add('VariableAssigner', params, parent);
        link(tails, risky);
        if (block.method !== 'goto') return [risky];
        const handler = add('Message', { content: [`recovered from {${risky}@_ERROR}`] }, parent);
        params.exception_goto = [handler];
        return [risky, handler];
      }
      case 'switch': {
        const sw = add('Switch', { conditions: [], end_cpn_ids: [] }, parent);
        link(tails, sw);
        const left = branch(block.left, parent, inIteration);
        const right = branch(block.right, parent, inIteration);
        const params = (components[sw] as Component).obj.params;
        params.conditions = [
          { logical_operator: 'and', items: [{ cpn_id: 'env.counter', operator: '≥', value: String(block.threshold) }], to: [left.first] },
        ];
        params.end_cpn_ids = [right.first];
        link([sw], left.first);
        link([sw], right.first);
        return [...left.tails, ...right.tails];
      }
      case 'parallel': {
        const fork = add('Message', { content: [`fork ${seq}`] }, parent);
        link(tails, fork);
        const a = branch(block.a, parent, inIteration);
        const b = branch(block.b, parent, inIteration);
        link([fork], a.first);
        link([fork], b.first);
        return [...a.tails, ...b.tails];
      }
      case 'loop': {
        const loop = add('Loop', {
          loop_variables: [{ variable: 'i', input_mode: 'constant', value: 0, type: 'number' }],
          loop_termination_condition: [],
          maximum_loop_count: block.max,
        }, parent);
        link(tails, loop);
        const start = add('LoopItem', {}, loop);
        const tick = add('VariableAssigner', { variables: [{ variable: `${loop}@i`, operator: '+=', parameter: 1 }] }, loop);
        link([start], tick);
        let bodyTails = [tick];
        if (block.exitAt !== null) {
          const exit = add('ExitLoop', {}, loop);
          const rest = add('Message', { content: [`loop round {${loop}@i}`] }, loop);
          const sw = add('Switch', {
            conditions: [{ logical_operator: 'and', items: [{ cpn_id: `${loop}@i`, operator: '=', value: String(block.exitAt) }], to: [exit] }],
            end_cpn_ids: [rest],
          }, loop);
          link([tick], sw);
          link([sw], exit);
          link([sw], rest);
          bodyTails = [rest];
        }
        chain(block.body, bodyTails, loop, inIteration);
        return [loop];
      }
      case 'iteration': {
        const items = Array.from({ length: block.items }, (_, i) => `it${i}`);
        const name = `list${seq}`;
        variables[name] = { name, type: 'array<string>', value: items };
        const iteration = add('Iteration', { items_ref: `env.${name}`, outputs: {} }, parent);
        link(tails, iteration);
        const start = add('IterationItem', {}, iteration);
        const first = add('Message', { content: [`each {item} at {index}`] }, iteration);
        link([start], first);
        chain(block.body, [first], iteration, true);
        (components[iteration] as Component).obj.params.outputs = { seen: { ref: `${first}@content` } };
        return [iteration];
      }
    }
  };

  const branch = (blocks: readonly Block[], parent: string | undefined, inIteration: boolean) => {
    const head = add('Message', { content: [`branch ${seq}`] }, parent);
    return { first: head, tails: chain(blocks, [head], parent, inIteration) };
  };

  const variables: Record<string, unknown> = {
    counter: { name: 'counter', type: 'number', value: 0 },
    trail: { name: 'trail', type: 'array<number>', value: [] },
  };
  const begin = 'begin';
  components[begin] = {
    obj: {
      component_name: 'Begin',
      params: {
        mode: spec.mode,
        prologue: 'hi',
        inputs: spec.beginRequired ? { topic: { name: 'Topic', type: 'line', optional: false } } : {},
      },
    },
    downstream: [],
    upstream: [],
  };
  const tails = chain(spec.blocks, [begin], undefined, false);
  const end = add('Message', { content: ['done c={env.counter} trail={env.trail}'] });
  link(tails, end);
  return { components, globals: { 'sys.query': '', 'sys.conversation_turns': 0 }, variables, history: [], path: [], retrieval: [] };
}

/** The knowledge base generated Retrievals search. */
export const GENERATED_KB = { id: 'e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0', name: 'generated-kb' };

/** Chunks whose words the generated queries (`q=<query> c=<counter>`) partly share. */
export function generatedKnowledge(): MemoryKnowledge {
  const words = ['start', 'again', 'question', 'also', 'v1', 'v2', 'v3', 'v4', '0', '1', '2', '3', '4', '5'];
  const chunks = Array.from({ length: 12 }, (_, i) => `q ${words[i % words.length]} ${words[(i * 5 + 3) % words.length]} c ${i % 6}`);
  return new MemoryKnowledge([{ ...GENERATED_KB, documents: [{ name: 'a.md', chunks: chunks.slice(0, 6) }, { name: 'b.md', chunks: chunks.slice(6) }] }]);
}

/** A deterministic answer for a field, varied by a counter. */
export function answerFor(type: string, k: number, options?: string[]): unknown {
  switch (type) {
    case 'integer':
      return (k * 7) % 6;
    case 'float':
    case 'number':
      return k / 2;
    case 'boolean':
      return k % 2 === 0;
    case 'options':
      return options?.[k % options.length] ?? 'a';
    case 'object':
      return k % 2 === 0 ? { k } : JSON.stringify([k, k + 1]);
    default:
      return `v${k}`;
  }
}
