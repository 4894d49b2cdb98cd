/**
 * The references a tool call added (a web search's results, a knowledge base's chunks) as the
 * call's record keeps them: in full when they are small — no string over the size a record
 * keeps inline, at most MAX_RECORDED_REFERENCES_BYTES in all — so that a replay can answer the
 * call from its record, which adds no blob to the turn and at most a few KB to its record;
 * larger ones by chunk id only, and a replay makes such a call again.
 */
import { isRecord } from '../canvas/references';
import type { ToolReferences } from '../tools/types';

/** @default how much of a tool call's references its record keeps in full */
export const MAX_RECORDED_REFERENCES_BYTES = 4096;
/** Strings longer than this in a call record go to blobs (lib/store/sessions CALL_RESULT_INLINE_BYTES). */
const INLINE_STRING_BYTES = 1024;

export function referencesForRecord(references: ToolReferences): ToolReferences | string[] {
  let inline = true;
  const text = JSON.stringify(references, (_key, value: unknown) => {
    if (typeof value === 'string' && value.length > INLINE_STRING_BYTES) inline = false;
    return value;
  });
  return inline && text.length <= MAX_RECORDED_REFERENCES_BYTES ? references : references.chunks.map((c) => c.id);
}

/** The references a record keeps in full; undefined when it keeps none, or ids only. */
export function referencesFromRecord(value: unknown): ToolReferences | undefined {
  if (!isRecord(value) || !Array.isArray(value.chunks) || !Array.isArray(value.doc_aggs)) return undefined;
  return value as unknown as ToolReferences;
}
