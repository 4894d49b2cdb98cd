/**
 * A workflow's form asked in the terminal, field by field: text as typed, options (and a
 * UserFillUp's decisions, by their labels) as a numbered choice, booleans as y/n, numbers and JSON checked before anything is sent, files uploaded
 * from a path. Enter skips an optional field (or keeps a value the run already holds).
 */
import type { FieldView, InputHint } from './client';
import type { LineReader, Output } from './terminal';

export type Answer =
  | { kind: 'value'; value: unknown }
  | { kind: 'file'; path: string }
  | { kind: 'skip' }
  | { kind: 'error'; message: string };

const hasValue = (v: unknown) => v !== null && v !== undefined && !(typeof v === 'string' && v.trim() === '');

function display(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The prompt for a field, e.g. `Age (integer): ` or `Newsletter (optional) [y/n]: `. */
export function promptFor(field: FieldView, key: string): string {
  const name = field.name || key;
  const kind = ({ integer: ' (integer)', float: ' (number)', number: ' (number)', object: ' (JSON)', file: ' (file path)', paragraph: '' } as Record<string, string>)[field.type] ?? '';
  const choice = field.type === 'boolean' ? ' [y/n]' : field.type === 'options' ? ` [1-${field.options?.length ?? 0}]` : '';
  const current = hasValue(field.value) ? ` (now: ${display(field.value)})` : '';
  return `${name}${field.optional ? ' (optional)' : ''}${kind}${choice}${current}: `;
}

/** Reads one typed answer as the field's value, or says why it cannot be one. */
export function parseAnswer(field: FieldView, raw: string): Answer {
  const text = raw.trim();
  if (text === '') {
    if (field.optional || hasValue(field.value)) return { kind: 'skip' };
    return { kind: 'error', message: 'this field is required (Enter skips optional fields only)' };
  }
  switch (field.type) {
    case 'options': {
      const options = field.options ?? [];
      const n = Number(text);
      if (/^\d+$/.test(text) && n >= 1 && n <= options.length) return { kind: 'value', value: options[n - 1] };
      const named = options.find((o) => o.toLowerCase() === text.toLowerCase());
      if (named !== undefined) return { kind: 'value', value: named };
      const labelled = field.decisions?.find((d) => d.label.toLowerCase() === text.toLowerCase());
      if (labelled) return { kind: 'value', value: labelled.id };
      return { kind: 'error', message: `choose a number from 1 to ${options.length}` };
    }
    case 'integer':
      return /^[-+]?\d+$/.test(text) && Number.isSafeInteger(Number(text)) ? { kind: 'value', value: Number(text) } : { kind: 'error', message: 'expected an integer' };
    case 'float':
    case 'number': {
      const n = Number(text);
      return Number.isFinite(n) && /\d/.test(text) ? { kind: 'value', value: n } : { kind: 'error', message: 'expected a number' };
    }
    case 'boolean':
      if (/^(y|yes|true|1)$/i.test(text)) return { kind: 'value', value: true };
      if (/^(n|no|false|0)$/i.test(text)) return { kind: 'value', value: false };
      return { kind: 'error', message: 'answer y or n' };
    case 'object':
      try {
        const parsed: unknown = JSON.parse(text);
        if (typeof parsed === 'object' && parsed !== null) return { kind: 'value', value: parsed };
      } catch {
        // below
      }
      return { kind: 'error', message: 'expected a JSON object or list, e.g. {"city": "London"}' };
    case 'file':
      return { kind: 'file', path: text };
    default:
      return { kind: 'value', value: raw };
  }
}

export type FormOutcome = { kind: 'inputs'; inputs: Record<string, unknown> } | { kind: 'command'; command: string } | { kind: 'ended' };

/** What a chat takes as a command rather than an answer, at any prompt. */
export const CHAT_COMMANDS = ['/quit', '/exit', '/new', '/stop'];

/**
 * Asks every field of `hint`: the inputs to send, a chat command typed instead of an answer,
 * or `ended` when the input ended first. `upload` turns a local path into a file id (errors
 * are shown and the field asked again).
 */
export async function askForm(hint: InputHint, lines: LineReader, out: Output, upload: (path: string) => Promise<string>): Promise<FormOutcome> {
  out.write(`\n${hint.tips ? `${hint.tips}\n` : ''}(form: Enter skips an optional field; /stop, /new and /quit work here too)\n`);
  const inputs: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(hint.inputs)) {
    if (field.type === 'options') {
      out.write(`${field.name || key}:\n`);
      // a decision shows its labels; the answer is still the decision's id
      const shown = field.decisions?.map((d) => d.label) ?? field.options ?? [];
      shown.forEach((option, i) => out.write(`  ${i + 1}) ${option}\n`));
    }
    for (;;) {
      const line = await lines.ask(promptFor(field, key));
      if (line === null) return { kind: 'ended' };
      if (CHAT_COMMANDS.includes(line.trim())) return { kind: 'command', command: line.trim() };
      const answer = parseAnswer(field, line);
      if (answer.kind === 'skip') break;
      if (answer.kind === 'error') {
        out.write(`  ${answer.message}\n`);
        continue;
      }
      if (answer.kind === 'file') {
        try {
          inputs[key] = await upload(answer.path);
          out.write(`  uploaded ${answer.path} as ${String(inputs[key])}\n`);
          break;
        } catch (error) {
          out.write(`  ${(error as Error).message}\n`);
          continue;
        }
      }
      inputs[key] = answer.value;
      break;
    }
  }
  return { kind: 'inputs', inputs };
}
