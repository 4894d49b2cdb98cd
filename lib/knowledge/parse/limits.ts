import { DocumentParseError } from './errors';

/**
 * What one document may cost to parse, so that a hostile or accidental file cannot exhaust a
 * warm process's memory. A document past a limit fails with the limit in its reason, rather
 * than being cut silently: half a manual indexed as if whole misleads retrieval.
 */

/** The largest file parsed, in bytes (64 MiB). */
export const MAX_PARSED_BYTES = 64 * 1024 * 1024;

/** The most text a document may yield, in UTF-16 characters (~1.2 M tokens of English). */
export const MAX_DOCUMENT_CHARS = 5_000_000;

/** The most pages a PDF may have. */
export const MAX_PDF_PAGES = 2_000;

/**
 * The deepest an HTML element may nest. htmlparser2 spends time in proportion to the depth at
 * each tag, so unbounded nesting would make parsing quadratic; browsers stop at 512 as well.
 */
export const MAX_HTML_DEPTH = 512;

/** Fails when `bytes` is larger than MAX_PARSED_BYTES. */
export function checkDocumentSize(bytes: Uint8Array): void {
  if (bytes.byteLength > MAX_PARSED_BYTES) {
    throw new DocumentParseError(`the file is ${formatBytes(bytes.byteLength)}; at most ${formatBytes(MAX_PARSED_BYTES)} are parsed`);
  }
}

/**
 * Counts the characters a parser has produced so far and fails once they pass
 * MAX_DOCUMENT_CHARS, so a parser can stop early instead of building the whole text first.
 */
export class TextBudget {
  #used = 0;

  add(text: string): void {
    this.#used += text.length;
    if (this.#used > MAX_DOCUMENT_CHARS) {
      throw new DocumentParseError(`the document has more than ${MAX_DOCUMENT_CHARS.toLocaleString('en-US')} characters of text`);
    }
  }
}

function formatBytes(n: number): string {
  return n >= 1024 * 1024 ? `${(n / (1024 * 1024)).toFixed(1)} MiB` : `${n} bytes`;
}
