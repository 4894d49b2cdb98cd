/**
 * The pure parts of webhook mode: Begin taking a delivery as its outputs in the engine (and
 * the run resuming exactly across a pause), the schema check of a delivery, and response
 * templates. The HTTP side is test/http/webhooks.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Canvas, compileWorkflow } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { extractSection } from '../../lib/webhooks/json-schema';
import { renderTemplate } from '../../lib/webhooks/answer';
import { exactReference } from '../../lib/canvas/references';
import { canvasFor, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';

const webhookBegin = { mode: 'Webhook', security: { auth_type: 'none', allow_anonymous: true }, execution_mode: 'Streaming' };

describe('Begin in webhook mode', () => {
  it('takes the delivery as its outputs, asks no form, and makes the run a task', async () => {
    const dsl = graph({
      begin: ['Begin', { ...webhookBegin, inputs: { name: { name: 'Name', type: 'line', optional: false } } }, ['Message:M']],
      'Message:M': ['Message', { content: ['{begin@body.order.id} by {begin@headers.X-Event} ({begin@query.page})'] }],
    });
    const canvas = canvasFor(dsl);
    const events = await turn(canvas, { webhook_payload: { query: { page: 2 }, headers: { 'X-Event': 'paid' }, body: { order: { id: 'A-1' } } } });
    expect(messages(events)).toEqual(['A-1 by paid (2)']);
    expect(canvas.status).toBe('completed');
    expect(canvas.isTerminal).toBe(true);
    expect(canvas.prologue).toBe('');
    const begin = events.find((e) => e.event === 'node_finished' && e.data.component_id === 'begin');
    expect(begin?.data).toMatchObject({ outputs: { query: { page: 2 }, headers: { 'X-Event': 'paid' }, body: { order: { id: 'A-1' } } } });
    // run without a delivery (the execute API), the sections are empty
    expect(messages(await turn(canvasFor(dsl)))).toEqual([' by  ()']);
  });

  it('keeps the delivery across a pause: restored in a fresh canvas, the run ends as one continuous run would', async () => {
    const dsl = graph({
      begin: ['Begin', webhookBegin, ['UserFillUp:Ok']],
      'UserFillUp:Ok': ['UserFillUp', { inputs: { ok: { name: 'OK?', type: 'boolean', optional: false } } }, ['Message:M']],
      'Message:M': ['Message', { content: ['{begin@body.id}: {UserFillUp:Ok@ok}'] }],
    });
    const payload = { query: {}, headers: {}, body: { id: 'B-2' } };
    const continuous = canvasFor(dsl);
    await turn(continuous, { webhook_payload: payload });
    const expected = messages(await turn(continuous, { inputs: { ok: true } }));
    const first = canvasFor(dsl);
    await turn(first, { webhook_payload: payload });
    expect(first.status).toBe('waiting_for_input');
    const workflow = compileWorkflow(dsl, builtinComponents);
    const restored = Canvas.restore(workflow, JSON.parse(JSON.stringify(first.serialize())), { seed: 7 });
    // a payload sent with a resume is not a new delivery: ignored
    expect(messages(await turn(restored, { inputs: { ok: true }, webhook_payload: { body: { id: 'other' } } }))).toEqual(expected);
    expect(expected).toEqual(['B-2: true']);
  });

  it('refuses a malformed payload and bad settings, naming the field', async () => {
    const dsl = graph({ begin: ['Begin', webhookBegin, ['Message:M']], 'Message:M': ['Message', { content: ['x'] }] });
    expect(() => canvasFor(dsl).check({ webhook_payload: 'text' as never })).toThrow(/webhook_payload: must be an object/);
    const bad = (params: Record<string, unknown>) => {
      try {
        compileWorkflow(graph({ begin: ['Begin', { ...webhookBegin, ...params }, []] }), builtinComponents);
      } catch (error) {
        return (error as { problems: { field: string; message: string }[] }).problems.map((p) => `${p.field}: ${p.message}`);
      }
      return [];
    };
    expect(bad({ mode: 'webhooks' })).toEqual(['obj.params.mode: must be "conversational", "task" or "Webhook"']);
    expect(bad({ methods: ['POST', 'TRACE'] })[0]).toMatch(/^obj\.params\.methods\.1: each method must be one of POST, GET/);
    expect(bad({ content_types: 'application/xml' })[0]).toMatch(/^obj\.params\.content_types\.0: each content type must be one of/);
    expect(bad({ execution_mode: 'Later' })[0]).toMatch(/^obj\.params\.execution_mode: must be "Immediately"/);
    expect(bad({ security: { auth_type: 'none', rate_limit: { limit: 0 }, max_body_size: '20MB' } })).toEqual([
      'obj.params.security.rate_limit.limit: must be > 0',
      'obj.params.security.max_body_size: must be at most 10MB',
    ]);
    expect(bad({ security: { auth_type: 'token', ip_whitelist: ['10.0.0.0/33', '::1'] } })).toEqual([
      'obj.params.security.token: token authentication needs {token_header, token_value}',
      'obj.params.security.ip_whitelist.0: "10.0.0.0/33" is not an IP address or CIDR',
    ]);
    // RAGFlow's spellings of the UI's defaults are taken
    expect(bad({ methods: 'post', content_types: ['application/json'], execution_mode: 'immediately', response: { status: '200' }, security: { auth_type: 'none', allow_anonymous: 'true', rate_limit: { limit: '10', per: 'second' }, max_body_size: '5MB' } })).toEqual([]);
  });
});

describe('the schema of a delivery', () => {
  const schema = { properties: { n: { type: 'number' }, ok: { type: 'boolean' }, items: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] } }, meta: { type: 'object' } }, required: ['n'] };

  it('keeps the declared fields, casts text to their types and fills missing optional ones', () => {
    expect(extractSection('body', { n: '4.5', ok: '1', meta: '{"a":1}', extra: true }, schema, { declaredOnly: false })).toEqual({
      value: { n: 4.5, ok: true, items: [], meta: { a: 1 } },
      problems: [],
    });
    // no declared properties: the section passes as it came; headers only when declared
    expect(extractSection('body', { any: 1 }, undefined, { declaredOnly: false }).value).toEqual({ any: 1 });
    expect(extractSection('headers', { 'x-a': '1' }, undefined, { declaredOnly: true }).value).toEqual({});
    expect(extractSection('headers', { 'x-event': 'e', cookie: 'c' }, { properties: { 'X-Event': { type: 'string' } } }, { declaredOnly: true, caseInsensitive: true }).value).toEqual({ 'X-Event': 'e' });
  });

  it('names every field that fails', () => {
    const { problems } = extractSection('body', { ok: 'perhaps', items: [{ sku: 1 }, {}] }, schema, { declaredOnly: false });
    expect(problems).toEqual([
      { field: 'body.n', message: 'is required' },
      { field: 'body.ok', message: 'expected boolean, got string "perhaps"' },
      { field: 'body.items.0.sku', message: 'expected string, got number 1' },
      { field: 'body.items.1.sku', message: 'is required' },
    ]);
    expect(extractSection('query', { kind: 'c' }, { properties: { kind: { type: 'string', enum: ['a', 'b'] } } }, { declaredOnly: false }).problems).toEqual([{ field: 'query.kind', message: 'must be one of "a", "b"' }]);
  });
});

describe('response templates', () => {
  const values: Record<string, unknown> = { 'begin@body': { id: 7, name: 'Ada' }, 'Agent:A@content': 'He said "hi"' };
  const lookup = (ref: NonNullable<ReturnType<typeof exactReference>>) => {
    if (ref.kind !== 'component') return undefined;
    const base = values[`${ref.componentId}@${ref.output}`] as Record<string, unknown> | string | undefined;
    return ref.path.length === 0 ? base : (base as Record<string, unknown> | undefined)?.[ref.path[0] as string];
  };

  it('a JSON template answers JSON: exact references keep their type, text is interpolated and escaped', () => {
    const out = renderTemplate('{"id": "{begin@body.id}", "all": "{begin@body}", "said": "{Agent:A@content}", "line": "#{begin@body.id}: {begin@body.name}", "gone": "{nope@x}"}', lookup);
    expect(out.contentType).toBe('application/json');
    expect(JSON.parse(out.body)).toEqual({ id: 7, all: { id: 7, name: 'Ada' }, said: 'He said "hi"', line: '#7: Ada', gone: null });
  });

  it('any other template answers text', () => {
    expect(renderTemplate('ok {begin@body.name}', lookup)).toEqual({ body: 'ok Ada', contentType: 'text/plain; charset=utf-8' });
  });
});
