/**
 * Pagination cursors: DynamoDB's LastEvaluatedKey as base64url JSON. A cursor must name a key
 * of the listing it is used with (its partition value is checked), so one listing's cursor —
 * or another tenant's — is refused as a bad request rather than reaching DynamoDB.
 */
import { HttpError } from './errors';

export function encodeCursor(key: Record<string, unknown> | undefined): string | null {
  return key ? Buffer.from(JSON.stringify(key), 'utf8').toString('base64url') : null;
}

/** `partition` is the attribute and value every key of this listing has. */
export function decodeCursor(cursor: string | undefined, partition: { attribute: string; value: string }): Record<string, unknown> | undefined {
  if (!cursor) return undefined;
  try {
    const key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (
      typeof key === 'object' && key !== null && !Array.isArray(key) &&
      (key as Record<string, unknown>)[partition.attribute] === partition.value &&
      Object.values(key).every((v) => typeof v === 'string' || typeof v === 'number')
    ) {
      return key as Record<string, unknown>;
    }
  } catch {
    // refused below
  }
  throw new HttpError('invalid_request', 'cursor: not a cursor of this listing');
}

/**
 * Cursors of listings that page by number (knowledge bases, their documents and chunks): the
 * next page and its size. A cursor names no tenant or item: used by another tenant, it pages
 * that tenant's own listing.
 */
export function encodePageCursor(next: { page: number; pageSize: number } | undefined): string | null {
  return next ? Buffer.from(JSON.stringify({ page: next.page, page_size: next.pageSize }), 'utf8').toString('base64url') : null;
}

export function decodePageCursor(cursor: string | undefined): { page: number; pageSize: number } | undefined {
  if (!cursor) return undefined;
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { page?: unknown; page_size?: unknown };
    const { page, page_size: pageSize } = value ?? {};
    if (Number.isSafeInteger(page) && Number.isSafeInteger(pageSize) && (page as number) >= 1 && (pageSize as number) >= 1 && (pageSize as number) <= 100) {
      return { page: page as number, pageSize: pageSize as number };
    }
  } catch {
    // refused below
  }
  throw new HttpError('invalid_request', 'cursor: not a cursor of this listing', { field: 'cursor' });
}
