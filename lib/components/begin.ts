/**
 * Begin: where every pass starts. Its `inputs` are a form asked on the first turn when a
 * required value is missing; the values stay for later passes of a conversational run and are
 * read downstream as `{begin@<field>}`.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { fieldOutputs, formFieldsSchema, toFormFields } from './form-fields';

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
    prologue: (p) => (p.enablePrologue === false ? '' : (p.prologue ?? '')),
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
