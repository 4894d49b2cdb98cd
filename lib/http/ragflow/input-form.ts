/**
 * `GET /api/v1/agents/{id}/components/{cid}/input-form`: the inputs a component takes, as
 * RAGFlow's `get_input_form` answers them, from the agent's active version. A form (Begin,
 * UserFillUp) answers its fields `{name, type, optional, options?, value}`; an LLM or an Agent
 * the references in its prompts, an Invoke those of its variables (`{type: "line", name}`,
 * named `<component name>@<output>`); Categorize, Retrieval, Switch, Iteration, Loop,
 * VariableAssigner and VariableAggregator the fixed fields RAGFlow gives them; any other
 * component none.
 */
import type { Workflow, WorkflowNode } from '../../canvas';
import { findReferences, isRecord } from '../../canvas/references';
import { compiledVersion } from '../../turns/execute';
import type { AppDeps } from '../app';
import { guardOf, param, reachableAgent, routeGroup } from './context';
import { RAGFLOW, RagflowError, success } from './envelope';

type InputForm = Record<string, Record<string, unknown>>;

const FIXED: Record<string, InputForm> = {
  Categorize: { query: { type: 'line', name: 'Query' } },
  Retrieval: { query: { name: 'Query', type: 'line' } },
  Switch: { urls: { name: 'URLs', type: 'line' } },
  Iteration: { items: { type: 'json', name: 'Items' } },
  Loop: { items: { type: 'json', name: 'Items' } },
  VariableAssigner: { items: { type: 'json', name: 'Items' } },
  VariableAggregator: { variables: { name: 'Variables', type: 'list' } },
};

/** `{ref: {type: "line", name}}` for every reference in `texts`, in order, each once. */
function referenceForm(workflow: Workflow, texts: readonly string[]): InputForm {
  const form: InputForm = {};
  for (const text of texts) {
    for (const ref of findReferences(text)) {
      if (form[ref.raw]) continue;
      const name = ref.kind === 'component' ? `${workflow.nodes.get(ref.componentId)?.displayName ?? ''}@${ref.raw.slice(ref.raw.indexOf('@') + 1)}` : ref.raw;
      form[ref.raw] = { type: 'line', name };
    }
  }
  return form;
}

const textsOf = (value: unknown): string[] => (typeof value === 'string' ? [value] : []);

export function inputForm(workflow: Workflow, node: WorkflowNode): InputForm {
  const params = (isRecord(node.params) ? node.params : {}) as Record<string, unknown>;
  if (node.definition.form) {
    return Object.fromEntries(node.definition.form.fields(node.params).map((f) => [f.key, {
      name: f.name,
      type: f.type,
      optional: f.optional,
      ...(f.options ? { options: f.options } : {}),
      ...(f.description ? { description: f.description } : {}),
      value: f.value ?? null,
    }]));
  }
  if (node.componentName === 'LLM' || node.componentName === 'Agent') {
    const prompts = Array.isArray(params.prompts) ? params.prompts : typeof params.prompts === 'string' ? [{ content: params.prompts }] : [];
    return referenceForm(workflow, [...textsOf(params.sys_prompt), ...prompts.flatMap((p) => (isRecord(p) ? textsOf(p.content) : []))]);
  }
  if (node.componentName === 'Invoke') {
    const variables = Array.isArray(params.variables) ? params.variables : [];
    return referenceForm(workflow, variables.flatMap((v) => (isRecord(v) && typeof v.ref === 'string' && v.ref.trim() ? [`{${v.ref.trim()}}`] : [])));
  }
  return FIXED[node.componentName] ?? {};
}

export function inputFormRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  app.get('/components/:cid/input-form', guard(async (c) => {
    const w = await reachableAgent(c, deps, param(c, 'id'));
    const workflow = await compiledVersion(deps.engine, w.tenant, w.id, w.activeVersion);
    const node = workflow.nodes.get(param(c, 'cid'));
    if (!node) throw new RagflowError(RAGFLOW.data, 'Component not found.');
    return success(c, inputForm(workflow, node));
  }));
  return app;
}
