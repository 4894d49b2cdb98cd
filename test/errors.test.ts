/**
 * lib/errors.ts and its two HTTP tables: every code has a status on the native API and a code
 * in RAGFlow's envelope, checked through the app's own error handling (`app.onError` for the
 * native routes, `guarded` as every RAGFlow route uses it), and the compiler refuses a table
 * that forgets a code.
 */
import { describe, expect, it } from 'vitest';
import { DslValidationError, InvalidInputsError } from '../lib/canvas/errors';
import { EaselError, ERROR_CODES, type ErrorCode, isErrorCode } from '../lib/errors';
import { createApp } from '../lib/http/app';
import { HttpError, STATUS_BY_CODE } from '../lib/http/errors';
import { guarded, RAGFLOW_BY_CODE } from '../lib/http/ragflow/envelope';
import { InboxFullError } from '../lib/store/errors';
import { StopAccepted, type TurnEngine } from '../lib/turns/execute';
import { TurnQueued } from '../lib/turns/turn-queued';

/** What each code answers: [native HTTP status, RAGFlow envelope code]. */
const EXPECTED: Record<ErrorCode, readonly [number, number]> = {
  invalid_request: [400, 101],
  invalid_dsl: [400, 101],
  invalid_inputs: [422, 101],
  unauthorized: [401, 109],
  forbidden: [403, 103],
  not_found: [404, 102],
  turn_conflict: [409, 103],
  run_finished: [409, 103],
  turn_in_progress: [409, 103],
  inbox_full: [409, 103],
  not_waiting_for_input: [409, 103],
  no_timer_armed: [409, 103],
  migration_refused: [409, 103],
  form_link_expired: [410, 103],
  form_link_used: [410, 103],
  idempotency_mismatch: [422, 101],
  workflow_failed: [422, 100],
  payload_too_large: [413, 101],
  rate_limited: [429, 103],
  unavailable: [503, 100],
  invalid_state: [500, 100],
  component_error: [500, 100],
  llm_error: [500, 100],
  tool_error: [500, 100],
  tool_suspended: [500, 100],
  tool_unavailable: [500, 100],
  ssrf_blocked: [500, 100],
  outbound_failed: [500, 100],
  invalid_config: [500, 100],
  lease_lost: [500, 100],
  claim_lost: [500, 100],
  stop_accepted: [500, 100],
  turn_queued: [500, 100],
  local_setup: [500, 100],
  dynamodb_local_unavailable: [500, 100],
  internal_error: [500, 100],
};

const CODES = Object.keys(ERROR_CODES) as ErrorCode[];

/** The real app, plus two routes that throw what they are told to. */
function probe() {
  const logged: string[] = [];
  const unknown: unknown[] = [];
  const app = createApp({
    engine: {} as TurnEngine,
    auth: { authenticate: async () => ({ tenant: 't', keyId: 'k', scope: 'admin', workflowIds: [] }) },
    logger: { info() {}, error: (message) => logged.push(message) },
  });
  let next: unknown;
  const throwing = (error: unknown) => {
    next = error;
  };
  app.get('/probe/native', () => {
    throw next;
  });
  app.get(
    '/probe/ragflow',
    guarded(async () => {
      throw next;
    }, (error) => unknown.push(error)),
  );
  return {
    logged,
    unknown,
    async native(error: unknown) {
      throwing(error);
      const res = await app.request('/probe/native');
      return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
    },
    async ragflow(error: unknown) {
      throwing(error);
      const res = await app.request('/probe/ragflow');
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    },
  };
}

describe('error codes', () => {
  it('has a doc line for every code, and recognises only its own', () => {
    for (const code of CODES) expect(ERROR_CODES[code].length).toBeGreaterThan(10);
    expect(CODES.every(isErrorCode)).toBe(true);
    expect(isErrorCode('no_such_code')).toBe(false);
    expect(isErrorCode('toString')).toBe(false);
  });

  it('the tables hold exactly the declared codes', () => {
    expect(Object.keys(STATUS_BY_CODE).sort()).toEqual([...CODES].sort());
    expect(Object.keys(RAGFLOW_BY_CODE).sort()).toEqual([...CODES].sort());
  });
});

describe('the native API', () => {
  const app = probe();

  it.each(CODES)('answers %s with its status', async (code) => {
    const [status] = EXPECTED[code];
    const before = app.logged.length;
    const res = await app.native(new EaselError(code, `probe of ${code}`));
    expect(res.status).toBe(status);
    if (status === 500) {
      // not an answer for a client: no details, and logged
      expect(res.body).toEqual({ code: 'internal_error', error: 'internal error' });
      expect(app.logged.length).toBe(before + 1);
    } else {
      expect(res.body).toEqual({ code, error: `probe of ${code}` });
      expect(app.logged.length).toBe(before);
    }
  });

  it('answers a stop that reached a worker 202, naming the run', async () => {
    const res = await app.native(new StopAccepted('r1', 3));
    expect(res.status).toBe(202);
    expect(res.headers.get('location')).toBe('/workflows/v1/workflow-runs/r1');
    expect(res.body).toEqual({ run_id: 'r1', turn_number: 3, status: 'running' });
  });

  it('answers an input queued behind the turn in flight 202, naming the turn it becomes', async () => {
    const res = await app.native(new TurnQueued('r1', 5, 'queued', 4, 'a'.repeat(32)));
    expect(res.status).toBe(202);
    expect(res.headers.get('location')).toBe('/workflows/v1/workflow-runs/r1');
    expect(res.body).toEqual({ run_id: 'r1', turn_number: 5, status: 'queued' });
  });

  it('answers a full inbox 409 inbox_full, with the run and the limit', async () => {
    const res = await app.native(new InboxFullError(3, 'waiting_for_input', { entries: 10, bytes: 65_536 }));
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ code: 'inbox_full', error: expect.stringContaining('queued'), current_turn_number: 3, status: 'waiting_for_input', limit: { entries: 10, bytes: 65_536 } });
  });

  it('answers an unknown error 500 without details, and logs it', async () => {
    const before = app.logged.length;
    const res = await app.native(new Error('secret detail'));
    expect(res).toMatchObject({ status: 500, body: { code: 'internal_error', error: 'internal error' } });
    expect(app.logged.length).toBe(before + 1);
  });
});

describe('the RAGFlow API', () => {
  const app = probe();

  it.each(CODES)('answers %s with its envelope code', async (code) => {
    const res = await app.ragflow(new EaselError(code, `probe of ${code}`));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ code: EXPECTED[code][1], message: `probe of ${code}` });
    expect(app.unknown).toEqual([]);
  });

  it('carries the fields and problems of a refused request as data', async () => {
    const fields = [{ field: 'name', message: 'required' }];
    expect((await app.ragflow(new HttpError('invalid_request', 'name: required', { fields }))).body).toEqual({ code: 101, message: 'name: required', data: { fields } });
    const inputs = new InvalidInputsError([{ component_id: 'begin', field: 'age', message: 'expected an integer' }]);
    expect((await app.ragflow(inputs)).body).toEqual({ code: 101, message: inputs.message, data: { fields: inputs.fields } });
    const dsl = new DslValidationError([{ component_id: 'LLM:A', field: 'llm_id', message: 'required' }]);
    expect((await app.ragflow(dsl)).body).toEqual({ code: 101, message: dsl.message, data: { problems: dsl.problems } });
  });

  it('answers an unknown error 100 without details, and reports it', async () => {
    const error = new Error('secret detail');
    const res = await app.ragflow(error);
    expect(res.body).toEqual({ code: 100, message: 'internal error' });
    expect(app.unknown).toEqual([error]);
  });
});

describe('the compiler', () => {
  it('refuses a status table that misses a code', () => {
    const { unavailable: _, ...noUnavailable } = STATUS_BY_CODE;
    // @ts-expect-error `unavailable` has no status
    const native: typeof STATUS_BY_CODE = noUnavailable;
    const { claim_lost: __, ...noClaimLost } = RAGFLOW_BY_CODE;
    // @ts-expect-error `claim_lost` has no RAGFlow code
    const ragflow: typeof RAGFLOW_BY_CODE = noClaimLost;
    expect('unavailable' in native || 'claim_lost' in ragflow).toBe(false);
  });

  it('refuses a code that is not declared, in a table or in an error', () => {
    // @ts-expect-error `made_up` is not an ErrorCode
    const table: typeof STATUS_BY_CODE = { ...STATUS_BY_CODE, made_up: 418 };
    // @ts-expect-error `made_up` is not an ErrorCode
    const error = new EaselError('made_up', 'no such code');
    expect(isErrorCode(error.code)).toBe(false);
    expect(Object.keys(table)).toContain('made_up');
  });
});
