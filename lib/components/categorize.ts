/**
 * Categorize: asks the model which category the query belongs to and routes to that
 * category's `to`. The answer is read as RAGFlow reads it: each category name is counted in the
 * answer (case-insensitively); the most frequent wins, ties go to the first, and an answer
 * naming none goes to the last category.
 *
 * The messages have RAGFlow's structure: a system prompt built from the categories (their
 * names, a "Category / Description" block each, the rules, then `USER: "example" → name`
 * lines), and one user message holding the recent conversation in the examples' form,
 * `---- Real Data ----` then `USER: "..." | ASSISTANT: "..." | USER: "<query>" →`, for the
 * model to complete with a name. The history window counts exchanges (a window of 1 is the
 * last answer and the query). As in RAGFlow, the classification prompt replaces any
 * `sys_prompt` in the DSL. Decided by the echo stand-in, its outputs carry `stand_in` saying the
 * pick is not a real classification.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { valueToText } from '../canvas/references';
import { checkTargets, checkVariable, idList } from './checks';
import { completeCounted, llmParamsShape, samplingOptions } from './llm-params';
import { ECHO_MODEL_ID } from '../llm/echo';
import { modelsOf } from './services';

/** Said in a Categorize's outputs when the echo stand-in decided it. */
export const ECHO_CLASSIFICATION_NOTICE = 'not a real classification: the echo stand-in answered, and it repeats the prompt, which names every category';

const category = z.lazy(() => z.looseObject({
  description: z.string().nullish(),
  examples: z
    .union([z.string(), z.array(z.string())])
    .nullish()
    // one example per line: templates pack several lines into one list element
    .transform((e) => (e === null || e === undefined ? [] : Array.isArray(e) ? e : [e]).flatMap((x) => x.split('\n')).map((x) => x.trim()).filter(Boolean)),
  to: z.union([z.string(), z.array(z.string())]).nullish().transform(idList).pipe(z.array(z.string()).min(1, 'a category needs a target')),
}));

const params = z.lazy(() => z.looseObject({
  ...llmParamsShape(),
  category_description: z
    .record(z.string().min(1), category)
    .refine((c) => Object.keys(c).length > 0, 'needs at least one category'),
  query: z.string().nullish().transform((q) => q || 'sys.query'),
  message_history_window_size: z.number().int().min(0).max(50).nullish().transform((w) => w ?? 1),
}));

export const categorize = defineComponent({
  name: 'Categorize',
  external: true,
  params,
  historyWindow: (p) => p.message_history_window_size,
  branchTargets: (p) => Object.values(p.category_description).flatMap((c) => c.to),
  check(p, scope) {
    return [
      ...checkVariable(p.query, scope, 'obj.params.query'),
      ...Object.entries(p.category_description).flatMap(([name, c]) =>
        checkTargets(c.to, scope, `obj.params.category_description.${name}.to`),
      ),
    ];
  },
  async invoke(p, ctx) {
    const names = Object.keys(p.category_description);
    const query = valueToText(await ctx.get(p.query));
    const history = [...ctx.history(p.message_history_window_size * 2)];
    if (history.at(-1)?.role === 'user') history.pop();
    const model = modelsOf(ctx).resolve(p.llm_id);
    const { text } = await completeCounted(
      model,
      {
        messages: [
          { role: 'system', content: classificationPrompt(p.category_description) },
          { role: 'user', content: realData([...history, { role: 'user', content: query }]) },
        ],
        ...samplingOptions(p),
      },
      ctx,
    );
    const chosen = pickCategory(text, names);
    const next = p.category_description[chosen]?.to ?? [];
    // the echo stand-in repeats the prompt, which names every category: its pick means nothing
    const standIn = model.id === ECHO_MODEL_ID ? { stand_in: ECHO_CLASSIFICATION_NOTICE } : {};
    return { outputs: { category_name: chosen, _next: next, ...standIn }, next };
  },
});

/**
 * The category named most often in `answer`; ties go to the first; none named: the last. Names
 * are matched without their surrounding spaces: a stock RAGFlow template names a category
 * "Negative review " and a model answering "Negative review" means it.
 */
export function pickCategory(answer: string, names: readonly string[]): string {
  const haystack = answer.toLowerCase();
  let best: string | undefined;
  let bestCount = 0;
  for (const name of names) {
    const needle = name.trim().toLowerCase();
    let count = 0;
    for (let at = haystack.indexOf(needle); needle !== '' && at >= 0; at = haystack.indexOf(needle, at + 1)) count++;
    if (count > bestCount) {
      best = name;
      bestCount = count;
    }
  }
  return best ?? (names.at(-1) as string);
}

function classificationPrompt(categories: z.output<typeof params>['category_description']): string {
  const lines = [
    'You sort user messages into categories. Read the input and put it into exactly ONE of these categories:',
    ...Object.keys(categories).map((name) => ` - ${name}`),
  ];
  const described = Object.entries(categories).filter(([, c]) => c.description);
  if (described.length > 0) {
    lines.push('', 'What each category covers:');
    for (const [name, c] of described) lines.push('------', `Category: ${name}`, `Description: ${c.description}`);
  }
  lines.push(
    '',
    '---- Instructions ----',
    ' - Weigh what the user says outright and what they imply',
    ' - Prefer the most specific category that fits',
    ' - Answer with the category name only, no explanation',
    ' - Answer "Other" only when no category fits',
  );
  const examples = Object.entries(categories).flatMap(([name, c]) => c.examples.map((e) => `USER: ${quoted(e)} → ${name}`));
  if (examples.length > 0) lines.push('', '---- Examples ----', ...examples);
  return lines.join('\n');
}

/** The conversation in the examples' form, ending with an arrow for the model to complete. */
function realData(exchange: readonly { role: string; content: string }[]): string {
  const turns = exchange.map((m) => `${m.role.toUpperCase()}: ${quoted(m.content)}`).join(' | ');
  return `---- Real Data ----\n${turns} →`;
}

/** One line in double quotes: line breaks become spaces. */
function quoted(text: string): string {
  return `"${text.replace(/\s*\n\s*/g, ' ')}"`;
}
