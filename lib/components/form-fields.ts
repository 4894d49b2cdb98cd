/**
 * The field definitions shared by Begin and UserFillUp (`params.inputs`), in RAGFlow's shape:
 * `{"age": {"name": "Age", "type": "integer", "optional": false, "options": []}}`.
 */
import { z } from 'zod';
import { type Decision, FIELD_TYPES, type FieldType, type FormField } from '../canvas/forms';
import { dict } from '../canvas/state';

const fieldSchema = z.lazy(() => z.looseObject({
  name: z.string().nullish(),
  type: z
    .string()
    .transform((t) => t.toLowerCase())
    .pipe(z.enum(FIELD_TYPES, { error: `must be one of: ${FIELD_TYPES.join(', ')}` })),
  optional: z.boolean().nullish(),
  options: z.array(z.union([z.string(), z.number()]).transform(String)).nullish(),
  description: z.string().nullish(),
  value: z.unknown().optional(),
}));

export const formFieldsSchema = z.lazy(() => z
  .record(z.string().min(1).max(128), fieldSchema)
  .nullish()
  .transform((inputs) => inputs ?? {}));

export type FormFieldsParam = z.output<typeof formFieldsSchema>;

export function toFormFields(inputs: FormFieldsParam): FormField[] {
  return Object.entries(inputs).map(([key, def]) => ({
    key,
    name: def.name || key,
    type: def.type as FieldType,
    optional: def.optional ?? false,
    ...(def.options && def.options.length > 0 ? { options: def.options } : {}),
    ...(def.description ? { description: def.description } : {}),
    value: def.value ?? null,
  }));
}

/** One output per field, null when the user gave no value. */
export function fieldOutputs(fields: FormField[], values: Readonly<Record<string, unknown>>) {
  const outputs = dict();
  for (const f of fields) outputs[f.key] = Object.hasOwn(values, f.key) ? values[f.key] : null;
  return outputs;
}

/** The field a choice of decisions is answered in: an `options` field of their ids, shown as buttons with their labels. */
export function decisionField(key: string, decisions: readonly Decision[]): FormField {
  return { key, name: 'Decision', type: 'options', optional: false, options: decisions.map((d) => d.id), decisions: decisions.map(({ id, label }) => ({ id, label })), value: null };
}
