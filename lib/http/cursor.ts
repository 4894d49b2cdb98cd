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
