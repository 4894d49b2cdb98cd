/**
 * Begin: where every pass starts. Its `inputs` are the run's first values, read downstream as
 * `{begin@<field>}`: explicit inputs, else a query when Begin has exactly one field (RAGFlow's
 * rule). Under native rules a required field without a value makes them a form asked on the
 * first turn; under RAGFlow's (canvas option `beginRules`) Begin never holds the run. Values
 * stay for later passes of a conversational run.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { fieldOutputs, formFieldsSchema, toFormFields } from './form-fields';

/** What RAGFlow's Begin says first when its DSL sets no `prologue`. */
export const DEFAULT_PROLOGUE = "Hi! I'm your smart assistant. What can I do for you?";

const params = z.looseObject({
  mode: z
    .enum(['conversational', 'task'], {
      error: 'must be "conversational" or "task" (webhook mode is not supported)',
    })
    .nullish()
    .transform((m) => m ?? 'conversational'),
  prologue: z.string().nullish(),
  enablePrologue: z.boolean().nullish(),
  enable_tips: z.boolean().nullish(),
  tips: z.string().nullish(),
  inputs: formFieldsSchema,
});

export const begin = defineComponent({
  name: 'Begin',
  params,
  entry: {
    mode: (p) => p.mode,
    prologue: (p) => (p.enablePrologue === false ? '' : (p.prologue ?? DEFAULT_PROLOGUE)),
  },
  form: {
    fields: (p) => toFormFields(p.inputs),
    holdForOptional: false,
    keepValues: true,
    tips: async (p, ctx) => (p.enable_tips && p.tips ? ctx.render(p.tips) : ''),
  },
  invoke(p, ctx) {
    return { outputs: fieldOutputs(toFormFields(p.inputs), ctx.formValues) };
  },
});
