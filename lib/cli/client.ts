/**
 * The CLI's view of the native API: JSON calls, file uploads and streamed turns, with every
 * refusal turned into a message that says what happened and what to do (server down, 401,
 * 403, 404, 409, 422, ...).
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { readSse, type SseFrame } from './sse';

/** An error the CLI reports as its message; exit code 1 (refused, unreachable) or 2 (usage). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export interface ApiErrorBody {
  code: string;
  error: string;
  current_turn_number?: number | null;
  status?: string;
  fields?: { field: string; message: string }[];
  problems?: unknown[];
  [extra: string]: unknown;
}

/** The server refused a request (or a streamed turn ended in `turn_error`). */
export class ApiError extends CliError {
  constructor(
    readonly status: number,
    readonly body: ApiErrorBody,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface FieldView {
  name: string;
  type: string;
  optional: boolean;
  options?: string[];
  /** A decision's choices (ids and button labels); `options` holds the ids. */
  decisions?: { id: string; label: string }[];
  description?: string;
  value: unknown;
}

export interface InputHint {
  component_id: string;
  tips: string;
  inputs: Record<string, FieldView>;
}

/** What a turn's response and a run's description share. */
export interface RunState {
  run_id: string;
  workflow_id?: string;
  status: string;
  turn_number: number;
  is_terminal?: boolean;
  is_completed?: boolean;
  turn_in_progress?: number | null;
  next_input_hint: InputHint | null;
  events?: { event: string; data: unknown }[];
  error?: unknown;
  /** A stand-in (the echo model) answered in place of a model this turn. */
  stand_in?: { model: string; component_ids: string[]; notice: string };
  /** Something sent this turn was not used (`query_not_used`: text sent while a form waits). */
  notice?: { code: string; message: string };
}

export interface ExecuteBody {
  run_id?: string;
  turn_number?: number;
  run_input?: { query?: string; inputs?: Record<string, unknown>; command?: 'stop' };
}

/** What a 4xx/5xx means to someone at a terminal. */
export function describeRefusal(status: number, body: ApiErrorBody, what?: string): string {
  const detail = `${status} ${body.code}: ${body.error}`;
  switch (body.code) {
    case 'unauthorized':
      return `the server refused the API key (${detail}); check --key or EASEL_API_KEY`;
    case 'forbidden':
      return `this key may not do that (${detail}); workflows and keys are managed with an admin key`;
    case 'not_found':
      return `${what ? `${what}: ` : ''}not found (${detail}); it does not exist, or this key may not use it`;
    case 'turn_conflict':
      return `this turn was already answered: the run is at turn ${body.current_turn_number ?? '?'} (${body.status ?? 'unknown status'}) (${detail})`;
    case 'run_finished':
      return `the run has finished${body.status ? ` (${body.status})` : ''} and takes no more turns; start a new run (${detail})`;
    case 'turn_in_progress':
      return `another turn of this run is still running; try again when it ends (${detail})`;
    case 'not_waiting_for_input':
      return `the run is not waiting for a form${body.status ? ` (${body.status})` : ''}: send a query instead (${detail})`;
    case 'no_timer_armed':
      return `the run has no form timer armed${body.status ? ` (${body.status})` : ''} (${detail})`;
    case 'invalid_inputs':
      return `invalid inputs: ${(body.fields ?? []).map((f) => `${f.field} (${f.message})`).join('; ') || body.error}`;
    case 'invalid_dsl':
      return `invalid DSL:\n${(body.problems ?? [body.error]).map((p) => `  - ${typeof p === 'string' ? p : JSON.stringify(p)}`).join('\n')}`;
    case 'unavailable':
      return `the server is unavailable right now and committed nothing; try again (${detail})`;
    default:
      return `the server answered ${detail}`;
  }
}

export class EaselClient {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
  ) {}

  /** The token of each run this client started with an execute key (docs/access.md), sent back on its requests. */
  private readonly runTokens = new Map<string, string>();

  private async send(method: string, path: string, init: { body?: string | FormData; headers?: Record<string, string>; what?: string } = {}): Promise<Response> {
    let response: Response;
    const runId = /\/workflow-runs\/([0-9a-f]{32})/.exec(path)?.[1] ?? (typeof init.body === 'string' ? /"run_id":"([0-9a-f]{32})"/.exec(init.body)?.[1] : undefined);
    const runToken = runId ? this.runTokens.get(runId) : undefined;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.apiKey}`, ...(runToken ? { 'easel-run-token': runToken } : {}), ...init.headers },
        ...(init.body !== undefined ? { body: init.body } : {}),
      });
      const issued = response.headers.get('easel-run-token');
      const issuedFor = issued?.split('.')[1];
      if (issued && issuedFor) this.runTokens.set(issuedFor, issued);
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message ?? (error as Error).message;
      throw new CliError(`cannot reach the Easel server at ${this.baseUrl} (${why}): is it running? (--base-url or EASEL_BASE_URL names it)`);
    }
    if (response.ok) return response;
    const text = await response.text().catch(() => '');
    let body: ApiErrorBody;
    try {
      body = JSON.parse(text) as ApiErrorBody;
      if (typeof body?.code !== 'string') throw new Error('not an error body');
    } catch {
      body = { code: `http_${response.status}`, error: text.slice(0, 200) || response.statusText };
    }
    throw new ApiError(response.status, body, describeRefusal(response.status, body, init.what));
  }

  async json<T>(method: string, path: string, body?: unknown, what?: string): Promise<T> {
    const response = await this.send(method, path, {
      ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      ...(what ? { what } : {}),
    });
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Uploads a local file for a `file` form field; returns its file id. */
  async upload(path: string): Promise<string> {
    let bytes: Buffer;
    try {
      bytes = await readFile(path);
    } catch (error) {
      throw new CliError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(bytes)]), basename(path));
    const response = await this.send('POST', '/workflows/v1/files', { body: form });
    return ((await response.json()) as { file_id: string }).file_id;
  }

  /**
   * One turn as a stream: every engine event goes to `onEvent` as it arrives; resolves with
   * the committed response, or throws ApiError for a refusal or a `turn_error` (nothing committed).
   */
  async turn(workflowId: string, body: ExecuteBody, onEvent: (frame: SseFrame) => void): Promise<RunState> {
    const response = await this.send('POST', `/workflows/v1/workflows/${encodeURIComponent(workflowId)}/execute`, {
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      what: body.run_id ? `workflow "${workflowId}" or run "${body.run_id}"` : `workflow "${workflowId}"`,
    });
    if (!(response.headers.get('content-type') ?? '').includes('text/event-stream')) return (await response.json()) as RunState;
    if (!response.body) throw new CliError('the server answered without a body');
    for await (const frame of readSse(response.body)) {
      if (frame.event === 'turn_response') return frame.data as RunState;
      if (frame.event === 'turn_error') {
        const error = frame.data as ApiErrorBody;
        const status = error.code === 'unavailable' ? 503 : error.code === 'internal_error' ? 500 : 409;
        throw new ApiError(status, error, `the turn was not committed: ${describeRefusal(status, error)}`);
      }
      onEvent(frame);
    }
    throw new CliError('the connection closed before the turn ended; the run may or may not have moved on (easel chat --run-id shows it)');
  }

  /**
   * One turn run by the server's worker (`Prefer: respond-async`): once it is accepted (202),
   * its events are followed from their cursor until it commits, reconnecting where a stream
   * ended. Resolves with the committed response.
   */
  async asyncTurn(workflowId: string, body: ExecuteBody, onEvent: (frame: SseFrame) => void, onAccepted?: (accepted: { run_id: string; turn_number: number }) => void): Promise<RunState> {
    const response = await this.send('POST', `/workflows/v1/workflows/${encodeURIComponent(workflowId)}/execute`, {
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', prefer: 'respond-async' },
      what: body.run_id ? `workflow "${workflowId}" or run "${body.run_id}"` : `workflow "${workflowId}"`,
    });
    const answer = (await response.json()) as RunState & { run_id: string; turn_number: number };
    if (response.status !== 202) return answer; // the same Idempotency-Key, already answered
    onAccepted?.(answer);
    return this.follow(answer.run_id, answer.turn_number, onEvent);
  }

  /** Follows turn `turn` of a run until it commits: its events as they are checkpointed. */
  async follow(runId: string, turn: number, onEvent: (frame: SseFrame) => void): Promise<RunState> {
    let cursor: string | undefined;
    // a stream lasts a few minutes at most; a long turn takes several
    for (let streams = 0; streams < 1000; streams++) {
      const response = await this.send('GET', `/workflows/v1/workflow-runs/${encodeURIComponent(runId)}/turns/${turn}/events?format=sse`, {
        headers: { accept: 'text/event-stream', ...(cursor ? { 'last-event-id': cursor } : {}) },
        what: `turn ${turn} of run "${runId}"`,
      });
      if (!response.body) throw new CliError('the server answered without a body');
      for await (const frame of readSse(response.body)) {
        if (frame.id !== undefined) cursor = frame.id;
        if (frame.event === 'turn_response') return frame.data as RunState;
        if (frame.event === 'follow_error') {
          const error = frame.data as ApiErrorBody;
          throw new ApiError(error.code === 'not_found' ? 404 : 503, error, `following the turn failed: ${describeRefusal(error.code === 'not_found' ? 404 : 503, error)}`);
        }
        onEvent(frame);
      }
    }
    throw new CliError(`turn ${turn} of run ${runId} is still running; follow it again later (GET /workflows/v1/workflow-runs/${runId}/turns/${turn}/events)`);
  }
}
