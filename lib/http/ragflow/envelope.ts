/**
 * RAGFlow's API conventions: HTTP 200 with `{code, message, data}`; code 0 for success,
 * 100 unexpected, 101 bad argument, 102 data (not found), 103 operation refused (conflict,
 * ownership), 109 authentication. Errors of the engine and the store map onto them once, here.
 */
import type { Context } from 'hono';
import { isRecord } from '../../canvas/references';
import { EaselError } from '../../errors';
import { errorResponse } from '../errors';

export const RAGFLOW = { ok: 0, exception: 100, argument: 101, data: 102, operation: 103, auth: 109 } as const;

export class RagflowError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** `{code: 0, data}` — RAGFlow drops `message` on success. */
export function ok(c: Context, data?: unknown): Response {
  return c.json(data === undefined ? { code: 0 } : { code: 0, data });
}

/** `{code: 0, message: "success", data}` — the shape of its create/update/delete answers. */
export function success(c: Context, data: unknown = true): Response {
  return c.json({ code: 0, message: 'success', data });
}

export function failure(c: Context, code: number, message: string, data?: unknown): Response {
  return c.json(data === undefined ? { code, message } : { code, message, data });
}

/** The RAGFlow code and message for any error thrown while serving a RAGFlow route. */
export function toRagflow(error: unknown): { code: number; message: string; data?: unknown } {
  if (error instanceof RagflowError) return { code: error.code, message: error.message, ...(error.data !== undefined ? { data: error.data } : {}) };
  const mapped = errorResponse(error);
  if (mapped) {
    const code =
      mapped.status === 404 ? RAGFLOW.data :
      mapped.status === 409 ? RAGFLOW.operation :
      mapped.status === 401 ? RAGFLOW.auth :
      mapped.status === 403 ? RAGFLOW.operation :
      mapped.status === 503 ? RAGFLOW.exception :
      RAGFLOW.argument;
    return { code, message: mapped.body.error, ...(mapped.body.fields ? { data: { fields: mapped.body.fields } } : {}), ...(mapped.body.problems ? { data: { problems: mapped.body.problems } } : {}) };
  }
  if (error instanceof EaselError) return { code: RAGFLOW.exception, message: error.message };
  return { code: RAGFLOW.exception, message: 'internal error' };
}

/** Runs a handler, answering any error in RAGFlow's envelope. */
export function guarded(handler: (c: Context) => Promise<Response>, onUnknown?: (error: unknown) => void) {
  return async (c: Context): Promise<Response> => {
    try {
      return await handler(c);
    } catch (error) {
      const mapped = toRagflow(error);
      if (mapped.code === RAGFLOW.exception && !(error instanceof EaselError)) onUnknown?.(error);
      return c.json(mapped);
    }
  };
}

/** RAGFlow's booleans in query strings: false only when spelled "false". */
export function queryFlag(value: string | undefined, fallback = true): boolean {
  if (value === undefined) return fallback;
  return !(value === 'false' || value === 'False');
}

export function epochMs(iso: string): number {
  return Date.parse(iso);
}

/** RFC 1123, as RAGFlow formats `create_date`. */
export function httpDate(iso: string): string {
  return new Date(iso).toUTCString();
}

/** The request's JSON object; an empty body counts as `{}`, as RAGFlow reads it. */
export async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (text.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed)) return parsed;
  } catch {
    // refused below
  }
  throw new RagflowError(RAGFLOW.argument, 'The request body must be a JSON object.');
}
