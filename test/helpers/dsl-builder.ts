/**
 * Small DSLs written inline: `linear(['Message', {...}], ...)` chains components after a Begin;
 * `graph({...})` takes `{id: [name, params, downstream, parent?]}`.
 */
type Spec = [name: string, params: Record<string, unknown>, downstream?: string[], parent?: string];

export function graph(nodes: Record<string, Spec>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const components: Record<string, unknown> = {};
  for (const [id, [name, params, downstream = [], parent]] of Object.entries(nodes)) {
    components[id] = {
      obj: { component_name: name, params },
      downstream,
      upstream: Object.entries(nodes)
        .filter(([, [, , ds = []]]) => ds.includes(id))
        .map(([from]) => from),
      ...(parent ? { parent_id: parent } : {}),
    };
  }
  return { components, ...extra };
}

export function message(text: string): [string, Record<string, unknown>] {
  return ['Message', { content: [text] }];
}

/**
 * An LLM node that asks `step <step> of {sys.query}` without history, so that a model server
 * can tell which step a request is for (`stepOf`).
 */
export function llmStep(step: string, downstream: string[]): Spec {
  return ['LLM', {
    llm_id: 'writer@Local',
    sys_prompt: 'Answer in one line.',
    prompts: [{ role: 'user', content: `step ${step} of {sys.query}` }],
    message_history_window_size: 0,
  }, downstream];
}

/** The step an `llmStep` request is for, from the messages the model server received. */
export function stepOf(messages: readonly { content: string }[]): string | undefined {
  return /step (\w)/.exec(messages.at(-1)?.content ?? '')?.[1];
}
