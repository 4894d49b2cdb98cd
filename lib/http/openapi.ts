/**
 * The API's OpenAPI 3.1 document (`GET /openapi.json`): the native routes and the
 * RAGFlow-compatible ones (lib/http/ragflow/openapi.ts). Generating it walks every route's zod
 * schemas, which no Lambda should spend a cold request on: `npm run bundle` generates it once
 * and ships it in the HTTP functions' packages (`openapi.json` at the package root), and the
 * app serves that file; elsewhere (npm start, tests) the app generates it from its own routes.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

export const OPENAPI_INFO = {
  openapi: '3.1.0',
  info: { title: 'Easel', version: '1', description: 'Pausable RAGFlow-format workflows as multi-turn sessions: the native API (/workflows/v1) and the RAGFlow-compatible API (/api/v1, tagged RAGFlow-compatible).' },
} as const;

/** Where a Lambda package keeps the generated document. */
export const PACKAGED_DOCUMENT = 'openapi.json';

/**
 * The packaged document of a Lambda function (`$LAMBDA_TASK_ROOT/openapi.json`), read on the
 * first request and kept; undefined outside Lambda.
 */
export function packagedDocument(taskRoot = process.env.LAMBDA_TASK_ROOT): (() => Promise<unknown>) | undefined {
  if (!taskRoot) return undefined;
  let document: Promise<unknown> | undefined;
  return () => {
    document ??= readFile(join(taskRoot, PACKAGED_DOCUMENT), 'utf8').then((text) => JSON.parse(text) as unknown);
    // a failed read is tried again on the next request
    document.catch(() => (document = undefined));
    return document;
  };
}
