/**
 * Builds the preset dictionary turn records are compressed with (lib/store/record-dictionary.ts)
 * and prints that file. It runs the example workflows of `npm start` (examples/) on the echo
 * model against an in-memory DynamoDB Local, reads back every turn record they wrote, keeps the
 * words a record repeats — keys, event and component names, statuses, short values — and drops
 * what belongs to one run (ids, timestamps, numbers, longer text), then joins one record of each
 * workflow and status, the most common kinds last (deflate reaches the end of its dictionary
 * most cheaply).
 *
 * A dictionary is frozen once records are written with it; this script is how it was made, and
 * how a next version (a new attribute, never an edit) would be.
 *
 *   npx tsx scripts/record-dictionary.ts > lib/store/record-dictionary.ts
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { readConfig } from '../lib/config';
import { startDynamoDbLocal } from '../lib/local/dynamodb-local';
import { buildRuntime } from '../lib/runtime';
import { keys } from '../lib/store/item-keys';
import { partsOf } from '../lib/store/sessions';
import { ensureTable } from '../lib/store/setup';
import { createWorkflow } from '../lib/store/workflows';
import { executeTurn } from '../lib/turns/execute';

/** Bytes of dictionary: deflate looks back at most 32 KB; past ~8 KB more gains little on records. */
const SIZE = 8192;
const TURNS = 8;
/** Strings up to this long are kept (names, statuses, field types); longer ones belong to a run. */
const KEPT_STRING = 24;

type FieldHint = { type?: string; options?: string[] };

/** An answer to every field of a form, by its type. */
function answer(hint: { inputs?: Record<string, FieldHint> } | null): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(hint?.inputs ?? {})) {
    if (field.type === 'file') continue;
    out[key] = field.type === 'integer' || field.type === 'float' ? 3 : field.type === 'boolean' ? true : field.type === 'options' ? field.options?.[0] : field.type === 'object' ? {} : 'an answer';
  }
  return out;
}

function scrub(value: unknown): unknown {
  if (Array.isArray(value)) return value.slice(0, 3).map(scrub);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrub(v)]));
  // dates and times belong to a run however short
  if (typeof value === 'string') return value.length <= KEPT_STRING && !/\d{4}-\d\d-\d\d/.test(value) ? value : '';
  if (typeof value === 'number') return 0;
  return value;
}

async function main(): Promise<void> {
  const dynamo = await startDynamoDbLocal({ inMemory: true });
  const table = 'record-dictionary';
  try {
    const runtime = buildRuntime(readConfig({ ...process.env, EASEL_DYNAMODB_ENDPOINT: dynamo.endpoint, EASEL_DYNAMODB_TABLE: table, EASEL_LLM_DEFAULT_MODEL: 'echo' }));
    await ensureTable(runtime.dynamo, table);
    const tenant = `dict${randomBytes(4).toString('hex')}`;
    const samples = new Map<string, string>();
    for (const file of readdirSync('examples').sort()) {
      const workflowId = file.replace(/\.json$/, '');
      const dsl = JSON.parse(readFileSync(`examples/${file}`, 'utf8')) as Record<string, unknown>;
      await createWorkflow(runtime.store, { tenant, id: workflowId, name: workflowId, dsl: dsl.dsl ?? dsl });
      let runId: string | undefined;
      let hint: Parameters<typeof answer>[0] = null;
      for (let turn = 1; turn <= TURNS; turn++) {
        const runInput = hint ? { inputs: answer(hint) } : { query: `question ${turn}` };
        const { response } = await executeTurn(runtime.engine, { tenant, workflowId, ...(runId ? { runId } : {}), runInput });
        runId = response.run_id;
        hint = response.next_input_hint as typeof hint;
        if (response.is_terminal) break;
      }
      const { Items = [] } = await runtime.store.doc.send(new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(tenant, runId!) } }));
      for (const item of Items) {
        if (item.kind !== 'turn') continue;
        const { s, h, q, r, c } = partsOf(item, ['s', 'h', 'q', 'r', 'c'], new Map());
        // the parts as a record holds them: the response parsed (R), not as text within text
        const parts = { s, h, q, R: JSON.parse(r as string), ...(c === undefined ? {} : { c }) };
        const kind = `${workflowId} ${String(item.status)}`;
        if (!samples.has(kind)) samples.set(kind, JSON.stringify(scrub(parts)));
      }
    }
    // the kinds most workflows share (waiting, completed) last
    const order = (kind: string) => (kind.endsWith('completed') ? 2 : kind.endsWith('waiting_for_input') ? 1 : 0);
    const text = [...samples.entries()].sort((a, b) => order(a[0]) - order(b[0]) || a[0].localeCompare(b[0])).map(([, s]) => s).join('').slice(-SIZE);
    process.stdout.write(render(text));
    runtime.dynamo.destroy();
  } finally {
    await dynamo.stop();
  }
}

function render(text: string): string {
  const lines: string[] = [];
  for (let i = 0; i < text.length; i += 96) lines.push(`  ${JSON.stringify(text.slice(i, i + 96))}`);
  return `/**
 * The preset dictionary turn records are compressed with (deflate with a preset dictionary,
 * RFC 1950/1951): what records repeat — keys, event and component names, statuses, short values
 * — so that a record of a few KB of JSON compresses to about half of what brotli makes of it
 * alone, under the 1 KB a write unit covers for a typical turn. Made by
 * scripts/record-dictionary.ts from the example workflows' records. Frozen: records written with
 * it are read with it, so it is never edited; a better one is a new version with an attribute of
 * its own (test/store/codec.test.ts holds its hash).
 */
export const RECORD_DICTIONARY_V1 = [
${lines.join(',\n')},
].join('');
`;
}

await main();
