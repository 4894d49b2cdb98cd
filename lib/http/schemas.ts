/**
 * Request and response schemas of the native API (zod 4), from which the OpenAPI 3.1 document
 * is generated. Requests are strict about types; the execute body is strict about its fields
 * too (a field it does not take would be dropped without a word: it is refused, naming the
 * field meant), the others are lenient about unknown fields.
 */
import { z } from '@hono/zod-openapi';
import { ON_BUSY_IF_SYNC, ON_BUSY_STRATEGIES } from '../turns/on-busy';
import { unknownFieldError } from './unknown-fields';

export const RUN_ID = z.string().regex(/^[0-9a-f]{32}$/, '32 lowercase hex characters').openapi({ example: '7f3c9a0e5b1d4e2f8a6b0c9d1e2f3a4b' });
export const WORKFLOW_ID = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, '1-64 letters, digits, "_" or "-"');
export const IDEMPOTENCY_KEY = z.string().regex(/^[A-Za-z0-9_.:-]{1,255}$/, '1-255 characters of A-Z a-z 0-9 _ . : -');

export const ErrorSchema = z
  .looseObject({ code: z.string(), error: z.string() })
  .openapi('Error', { description: 'Every error: a stable code, a message, and details where they help (fields, problems, current_turn_number).' });

/**
 * What a turn does when another turn of its run is in flight (docs/double-texting.md): a
 * strategy's name, or `{strategy, if_sync}`. The workflow's setting, and the execute body's override.
 */
export const OnBusySchema = z
  .union([
    z.enum(ON_BUSY_STRATEGIES),
    z.strictObject({
      strategy: z.enum(ON_BUSY_STRATEGIES),
      if_sync: z.enum(ON_BUSY_IF_SYNC).optional().openapi({ description: '`interrupt` and `rollback` against a synchronous turn: answer as `reject` does (the default), or queue as `enqueue` does' }),
    }),
  ])
  .openapi('OnBusy', {
    description: 'When another turn of the run is in flight: `reject` (409 turn_in_progress, the default), `enqueue` (202: the input becomes a turn once the turns ahead of it commit), `interrupt` (likewise, and an async turn in flight stops at its next checkpoint as `interrupted`), `rollback` (likewise, and an async turn in flight is discarded as `rolled_back`, the run back at the state before it)',
  });

/** Text, or one text per language as RAGFlow's template files carry it (`{en, zh, ...}`). */
const Localized = (max: number) => z.union([z.string().max(max), z.record(z.string(), z.string().max(max))]);

const DropUnsupportedTools = z.boolean().default(false).openapi({
  description: 'Leave out Agent tool entries of kinds Easel does not offer (Bing, DuckDuckGo, CodeExec, ...) instead of refusing the DSL; each one left out is reported in `warnings`',
});

export const CreateWorkflow = z
  .object({
    name: z.string().min(1).max(200).optional().openapi({ description: 'Required unless `title` is given' }),
    title: Localized(200).optional().openapi({ description: "A RAGFlow template file's title: its English text (`en`) names the workflow when `name` is absent" }),
    description: Localized(2000).optional().openapi({ description: 'Text, or its translations (the English one is kept)' }),
    canvas_type: z.string().max(64).nullish().openapi({ description: "RAGFlow's canvas type (a template's shelf, e.g. \"Customer Support\")" }),
    on_busy: OnBusySchema.optional().openapi({ description: 'What a turn does when another turn of the run is in flight, unless its request says (an Easel setting of the workflow, not of its DSL). @default "reject"' }),
    canvas_category: z.enum(['agent_canvas', 'dataflow_canvas']).optional(),
    dsl: z.record(z.string(), z.unknown()).openapi({ description: 'A RAGFlow canvas DSL: {components, globals, ...}' }),
    drop_unsupported_tools: DropUnsupportedTools,
  })
  .openapi('CreateWorkflow', { description: '`{name, description?, dsl}`, or a RAGFlow template file as it ships: `{id, title: {en, ...}, description: {en, ...}, canvas_type, dsl}`' });

export const Workflow = z
  .looseObject({
    id: z.string(),
    name: z.string(),
    description: z.string(),
    canvas_type: z.string().nullable(),
    canvas_category: z.string(),
    version: z.number().int(),
    active_version: z.number().int(),
    latest_version: z.number().int(),
    created_at: z.string(),
    updated_at: z.string(),
    webhook_url: z.string().optional().openapi({ description: 'Admin keys, when the active version\u2019s Begin is in webhook mode: where deliveries go (built on EASEL_PUBLIC_URL)' }),
    prologue: z.string().optional().openapi({ description: 'What the active version\u2019s Begin says before the first turn, as RAGFlow shows it first in a chat (its `prologue`, RAGFlow\u2019s default greeting when it sets none; empty in webhook mode or with `enablePrologue: false`). In the answers about one workflow, not in listings' }),
    on_busy: z.object({ strategy: z.enum(ON_BUSY_STRATEGIES), if_sync: z.enum(ON_BUSY_IF_SYNC) }).openapi({ description: 'What a turn does when another turn of the run is in flight, unless its request says (docs/double-texting.md)' }),
  })
  .openapi('Workflow');

export const UpdateWorkflow = z
  .strictObject({
    name: z.string().min(1).max(200).optional(),
    description: z.string().max(2000).optional(),
    on_busy: OnBusySchema.optional(),
  })
  .openapi('UpdateWorkflow', { description: 'The fields to change; an absent one is left as it is. Versions (the DSL) are not changed here: POST .../versions' });

export const CreateVersion = z
  .object({ dsl: z.record(z.string(), z.unknown()), activate: z.boolean().default(true), drop_unsupported_tools: DropUnsupportedTools })
  .openapi('CreateVersion');

export const RunInput = z
  .strictObject({
    query: z.string().max(100_000).optional(),
    inputs: z.record(z.string(), z.unknown()).optional().openapi({ description: 'Form values, raw or as {type, value}' }),
    command: z.enum(['stop']).optional(),
    files: z.array(z.unknown()).optional(),
    user_id: z.string().max(256).optional(),
  }, { error: unknownFieldError({ question: 'query', message: 'query' }) })
  .openapi('RunInput');

export const ExecuteBody = z
  .strictObject({
    run_id: RUN_ID.optional(),
    turn_number: z.number().int().min(0).optional(),
    run_input: RunInput.optional(),
    callback_url: z
      .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
      .max(2048)
      .optional()
      .openapi({ description: 'With `Prefer: respond-async`, or for an input queued by `on_busy`: told (a signed POST) when this turn pauses, completes, fails or is cancelled. An http(s) URL that the SSRF guard lets through, checked when the request comes (else 400 `invalid_request` naming `callback_url`)' }),
    on_busy: OnBusySchema.optional().openapi({ description: "When another turn of the run is in flight; absent: the workflow's setting (by default `reject`)" }),
  }, {
    // refused naming the field meant; the known fields are this schema's own, whatever is added to it
    error: unknownFieldError({ session_id: 'run_id', question: 'run_input.query', turn: 'turn_number' }),
  })
  .openapi('ExecuteRequest');

export const TurnResponseSchema = z
  .looseObject({
    run_id: z.string(),
    status: z.string(),
    turn_number: z.number().int(),
    events: z.array(z.looseObject({ event: z.string(), data: z.unknown() })),
    is_waiting_for_input: z.boolean(),
    is_completed: z.boolean(),
    is_terminal: z.boolean(),
    error: z.unknown().nullable(),
    next_input_hint: z.unknown().nullable(),
    has_active_companions: z.boolean(),
    has_background_work: z.boolean(),
    notice: z
      .object({ code: z.enum(['query_not_used']), message: z.string() })
      .optional()
      .openapi({ description: 'Present only when something sent was not used: `query_not_used` — text sent to a run waiting for a form answered none of its fields (it was recorded, and the form is asked again)' }),
  })
  .openapi('TurnResponse');

export const RunSummarySchema = z
  .looseObject({ run_id: z.string(), workflow_id: z.string(), status: z.string(), turn_number: z.number().int() })
  .openapi('Run');

export const Page = (item: z.ZodType) => z.object({ items: z.array(item), next_cursor: z.string().nullable() });

export const CreateKey = z
  .object({
    name: z.string().min(1).max(200),
    scope: z.enum(['admin', 'execute']),
    workflow_ids: z.array(WORKFLOW_ID).max(100).default([]),
  })
  .refine((k) => k.scope === 'admin' || k.workflow_ids.length > 0, { path: ['workflow_ids'], message: 'an execute key needs at least one workflow' })
  .openapi('CreateKey');

export const KeySchema = z
  .looseObject({ id: z.string(), name: z.string(), scope: z.string(), workflow_ids: z.array(z.string()), created_at: z.string(), revoked_at: z.string().nullable() })
  .openapi('ApiKey');

export const Cursor = z.string().max(2048).optional();
export const Limit = z.coerce.number().int().min(1).max(100).default(20);
