/**
 * What the native knowledge-base routes and RAGFlow's dataset routes share: the knowledge
 * service (503 when the server has none), reading uploaded documents within their cap, storing a
 * request's documents all or none, and searching one tenant's knowledge bases.
 */
import { ComponentError } from '../canvas/errors';
import { EaselError } from '../errors';
import { MAX_DOCUMENT_BYTES } from '../knowledge/limits';
import type { KnowledgeAdmin, KnowledgeBase, KnowledgeDocument, NewDocument, RetrievalQuery, RetrievalResult } from '../knowledge/types';
import type { AppDeps } from './app';
import { HttpError } from './errors';

/** What a multipart request adds around its files: headers, boundaries, small fields. */
export const MULTIPART_OVERHEAD_BYTES = 64 * 1024;
/** RAGFlow's file name limit (`FILE_NAME_LEN_LIMIT`), in UTF-8 bytes. */
export const MAX_DOCUMENT_NAME_BYTES = 255;

export function knowledgeOf(deps: AppDeps): KnowledgeAdmin {
  if (!deps.knowledge) throw new EaselError('unavailable', 'knowledge bases are not configured on this server');
  return deps.knowledge;
}

export function maxDocumentBytes(deps: AppDeps): number {
  return deps.maxDocumentBytes ?? MAX_DOCUMENT_BYTES;
}

/** The `file` parts of a parsed multipart body (Hono's `parseBody({all: true})`), in order. */
export function fileParts(form: Record<string, unknown>): unknown[] {
  return ([] as unknown[]).concat(form.file ?? []);
}

/** Why a part cannot be a document (not a file, no name, a name or size past its limit), or its bytes. */
export async function readDocument(part: unknown, maxBytes: number): Promise<NewDocument> {
  if (!(part instanceof File)) throw new HttpError('invalid_request', 'file: send each document as a multipart/form-data file part named "file"', { field: 'file' });
  if (part.name === '') throw new HttpError('invalid_request', 'file: a document needs a file name', { field: 'file' });
  if (Buffer.byteLength(part.name, 'utf8') > MAX_DOCUMENT_NAME_BYTES) {
    throw new HttpError('invalid_request', `file: the file name is over ${MAX_DOCUMENT_NAME_BYTES} bytes`, { field: 'file' });
  }
  if (part.size > maxBytes) throw new HttpError('payload_too_large', `${part.name} is ${part.size} bytes; a document is at most ${maxBytes} bytes`, { limit: maxBytes });
  return { name: part.name, mime_type: (part.type || 'application/octet-stream').split(';')[0]?.trim() || 'application/octet-stream', bytes: new Uint8Array(await part.arrayBuffer()) };
}

/**
 * Stores every document or none: when one is refused (an unsupported type, a full knowledge
 * base), those stored before it are deleted again and the refusal is thrown.
 */
export async function uploadAll(knowledge: KnowledgeAdmin, tenant: string, kbId: string, docs: readonly NewDocument[]): Promise<KnowledgeDocument[]> {
  const stored: KnowledgeDocument[] = [];
  try {
    for (const doc of docs) stored.push(await knowledge.upload(tenant, kbId, doc));
    return stored;
  } catch (error) {
    if (stored.length > 0) await knowledge.deleteDocuments(tenant, kbId, stored.map((d) => d.id));
    throw error;
  }
}

/**
 * A search of the tenant's knowledge bases. A backend that cannot answer for a reason the
 * tenant can fix (a refused key, a model that is not configured) is a request error naming it,
 * not an internal one; transient failures stay `unavailable`.
 */
export async function searchKnowledge(knowledge: KnowledgeAdmin, tenant: string, kbs: readonly KnowledgeBase[], query: RetrievalQuery, signal: AbortSignal): Promise<RetrievalResult> {
  try {
    return await knowledge.forTenant(tenant).retrieve(kbs, query, signal);
  } catch (error) {
    if (error instanceof ComponentError) throw new HttpError('invalid_request', `the knowledge base cannot be searched: ${error.message}`);
    throw error;
  }
}
