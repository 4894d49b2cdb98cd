/**
 * UserFillUp: a form that pauses the run until the user answers it. It asks on every visit
 * (inside a loop, every round); values arrive with the next turn and are read downstream as
 * `{UserFillUp:Id@<field>}`. Tips may reference variables and are shown with the form.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { fieldOutputs, formFieldsSchema, toFormFields } from './form-fields';

const DEFAULT_TIPS = 'Please fill up the form';

const params = z.looseObject({
  enable_tips: z.boolean().nullish().transform((v) => v ?? true),
  tips: z.string().nullish().transform((v) => v ?? DEFAULT_TIPS),
  inputs: formFieldsSchema,
});

export const userFillUp = defineComponent({
  name: 'UserFillUp',
  params,
  form: {
    fields: (p) => toFormFields(p.inputs),
    holdForOptional: true,
    keepValues: false,
    tips: async (p, ctx) => (p.enable_tips ? ctx.render(p.tips) : ''),
  },
  async invoke(p, ctx) {
    const outputs = fieldOutputs(toFormFields(p.inputs), ctx.formValues);
    if (p.enable_tips) outputs.tips = await ctx.render(p.tips);
    return { outputs };
  },
});
