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
