/**
 * The workflows the measurements run. The bench workflow, which every measurement uses: ten
 * components in a line, a form (UserFillUp) at the fifth. A conversational run alternates two
 * kinds of turn: a query runs nodes 1-4 and pauses at the form; the form's answer runs nodes
 * 5-10 and completes the pass. The next query starts a new pass with the conversation kept.
 * Every turn's output has the same size. Beside it, the kinds of turn measurement 2 counts
 * round trips of: a pure turn, and turns calling a model.
 */
import { builtinComponents } from '../lib/components';
import { compileWorkflow, type RunInput, type Workflow } from '../lib/canvas';

/** Component ids in order; node 5 is the form. */
export const NODE_IDS = [
  'begin',
  'VariableAssigner:KeepQuery',
  'Message:Ack',
  'VariableAssigner:Stamp',
  'UserFillUp:Details',
  'VariableAssigner:KeepName',
  'Message:Thanks',
  'VariableAssigner:Note',
  'VariableAssigner:Summary',
  'Message:Done',
] as const;

const params: Record<(typeof NODE_IDS)[number], [string, Record<string, unknown>]> = {
  begin: ['Begin', { mode: 'conversational', prologue: 'Hello.', enablePrologue: true, inputs: {} }],
  'VariableAssigner:KeepQuery': ['VariableAssigner', { variables: [{ variable: 'env.last_query', operator: 'overwrite', parameter: 'sys.query' }] }],
  'Message:Ack': ['Message', { content: ['You asked: {sys.query}. A few details, please.'], stream: true }],
  'VariableAssigner:Stamp': ['VariableAssigner', { variables: [{ variable: 'env.stage', operator: 'set', parameter: 'asked {env.last_query}' }] }],
  'UserFillUp:Details': ['UserFillUp', {
    enable_tips: true,
    tips: 'Your name and plan for "{sys.query}"',
    inputs: {
      name: { name: 'Name', type: 'line', optional: false, options: [] },
      plan: { name: 'Plan', type: 'options', optional: false, options: ['free', 'pro'] },
    },
  }],
  'VariableAssigner:KeepName': ['VariableAssigner', { variables: [{ variable: 'env.name', operator: 'overwrite', parameter: 'UserFillUp:Details@name' }] }],
  'Message:Thanks': ['Message', { content: ['Thanks {env.name}, plan {UserFillUp:Details@plan}.'], stream: true }],
  'VariableAssigner:Note': ['VariableAssigner', { variables: [{ variable: 'env.stage', operator: 'set', parameter: 'answered by {env.name}' }] }],
  'VariableAssigner:Summary': ['VariableAssigner', { variables: [{ variable: 'env.summary', operator: 'set', parameter: '{env.last_query} / {env.name}' }] }],
  'Message:Done': ['Message', { content: ['Done: {env.summary} ({env.stage}).'], stream: true }],
};

/** The RAGFlow DSL of the bench workflow. */
export function benchDsl(): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  NODE_IDS.forEach((id, i) => {
    const [name, p] = params[id];
    components[id] = {
      obj: { component_name: name, params: p },
      downstream: i + 1 < NODE_IDS.length ? [NODE_IDS[i + 1]] : [],
      upstream: i > 0 ? [NODE_IDS[i - 1]] : [],
    };
  });
  const variable = (name: string) => [name, { name, type: 'string', value: '' }];
  return {
    components,
    globals: { 'sys.query': '', 'sys.user_id': '', 'sys.conversation_turns': 0, 'sys.files': [], 'sys.history': [] },
    variables: Object.fromEntries(['last_query', 'stage', 'name', 'summary'].map(variable)),
    history: [],
    path: [],
    retrieval: [],
  };
}

export function benchWorkflow(): Workflow {
  return compileWorkflow(benchDsl(), builtinComponents);
}

/**
 * The input of turn `n` (1-based) of a conversation: odd turns ask (fixed-length query), even
 * turns answer the form. Sizes do not depend on n.
 */
export function turnInput(n: number): RunInput {
  const tag = String(n % 1000).padStart(3, '0');
  return n % 2 === 1 ? { query: `question ${tag} about the bench plan` } : { inputs: { name: `Ada ${tag}`, plan: 'pro' } };
}

/** Begin (conversational) -> Message: a turn that reaches nothing outside the run. */
export function pureDsl(): Record<string, unknown> {
  return {
    components: {
      begin: { obj: { component_name: 'Begin', params: { mode: 'conversational', prologue: 'Hi.' } }, downstream: ['Message:Echo'], upstream: [] },
      'Message:Echo': { obj: { component_name: 'Message', params: { content: ['You said: {sys.query}'] } }, downstream: [], upstream: ['begin'] },
    },
  };
}

/**
 * Begin -> `modelCalls` LLM components in a line -> Message: every turn calls the model that
 * many times (the model EASEL_LLM_DEFAULT_MODEL names; bench/lib/model-server.ts).
 */
export function modelDsl(modelCalls: number): Record<string, unknown> {
  const llms = Array.from({ length: modelCalls }, (_, i) => `LLM:Step${i + 1}`);
  const chain = ['begin', ...llms, 'Message:Answer'];
  const components: Record<string, unknown> = {};
  chain.forEach((id, i) => {
    const obj = id === 'begin'
      ? { component_name: 'Begin', params: { mode: 'conversational' } }
      : id.startsWith('LLM:')
        ? { component_name: 'LLM', params: { llm_id: 'bench@Local', sys_prompt: 'Answer briefly.', prompts: [{ role: 'user', content: '{sys.query}' }] } }
        : { component_name: 'Message', params: { content: [`{${chain[i - 1]}@content}`] } };
    components[id] = { obj, downstream: i + 1 < chain.length ? [chain[i + 1]] : [], upstream: i > 0 ? [chain[i - 1]] : [] };
  });
  return { components };
}
