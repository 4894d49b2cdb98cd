/** One turn's request to the engine, and its check before anything changes. */
import { InvalidRunInputError } from './errors';
import { isRecord } from './references';

/** One turn's request to the engine. Every field is optional. */
export interface RunInput {
  query?: string | null;
  /** Values for the pending form (or Begin's fields on the first turn), raw or `{type, value}`. */
  inputs?: Record<string, unknown> | null;
  files?: unknown[] | null;
  user_id?: string | null;
  /** Aborting cancels the run between batches (status `cancelled`). */
  signal?: AbortSignal;
  /** `timeout`: the waiting forms' timer fired; they take their timeout branch. */
  command?: 'timeout' | null;
  /**
   * An HTTP delivery that starts the run (Begin in webhook mode): `{query, headers, body}`,
   * Begin's outputs. Read when a pass starts, by Begin alone; ignored on a resume.
   */
  webhook_payload?: Record<string, unknown> | null;
}

export interface ParsedInput {
  timeout: boolean;
  query: string | undefined;
  inputs: Record<string, unknown> | undefined;
  files: unknown[] | undefined;
  userId: string | undefined;
  signal: AbortSignal;
  webhookPayload: Record<string, unknown> | undefined;
}

export const NEVER_ABORTED = new AbortController().signal;

/** Throws `InvalidRunInputError` naming the first malformed field. */
export function parseRunInput(input: RunInput): ParsedInput {
  if (!isRecord(input as unknown)) throw new InvalidRunInputError('run_input', 'must be an object');
  const { query, inputs, files, user_id: userId, signal, command, webhook_payload: webhookPayload } = input;
  if (command !== undefined && command !== null && command !== 'timeout') {
    throw new InvalidRunInputError('command', 'must be "timeout" (stop has its own method)');
  }
  if (query !== undefined && query !== null && typeof query !== 'string') {
    throw new InvalidRunInputError('query', 'must be a string');
  }
  if (inputs !== undefined && inputs !== null && !isRecord(inputs)) {
    throw new InvalidRunInputError('inputs', 'must be an object of field values');
  }
  if (files !== undefined && files !== null && !Array.isArray(files)) {
    throw new InvalidRunInputError('files', 'must be a list');
  }
  if (userId !== undefined && userId !== null && typeof userId !== 'string') {
    throw new InvalidRunInputError('user_id', 'must be a string');
  }
  if (webhookPayload !== undefined && webhookPayload !== null && !isRecord(webhookPayload)) {
    throw new InvalidRunInputError('webhook_payload', 'must be an object ({query, headers, body})');
  }
  return {
    timeout: command === 'timeout',
    query: query === null || query === undefined || query === '' ? undefined : query,
    inputs: inputs ?? undefined,
    files: files ?? undefined,
    userId: userId || undefined,
    signal: signal ?? NEVER_ABORTED,
    webhookPayload: webhookPayload ?? undefined,
  };
}
