/**
 * Plain text: UTF-8 (a byte-order mark dropped), or UTF-16 when a byte-order mark says so.
 * Anything else fails: a file with NUL bytes is binary, and bytes that are not valid UTF-8
 * are another encoding, which we would only guess at. Line endings become `\n`.
 */
import type { ParsedDocument } from '../types';
import { DocumentParseError } from './errors';
import { TextBudget } from './limits';

/**
 * The file's text, strictly decoded.
 *
 * @example
 *   decodeText(new TextEncoder().encode('\uFEFFhello\r\n')); // 'hello\n'
 */
export function decodeText(bytes: Uint8Array): string {
  const text = decodeStrict(bytes, unicodeEncoding(bytes));
  if (text.includes('\u0000')) throw new DocumentParseError('the file is binary, not text');
  new TextBudget().add(text);
  return normalizeNewlines(text);
}

export function parseText(bytes: Uint8Array): ParsedDocument {
  return { sections: [{ text: decodeText(bytes) }] };
}

/** `\r\n` and a lone `\r` as `\n`, as RAGFlow's chunker normalizes them. */
export function normalizeNewlines(text: string): string {
  return text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text;
}

type UnicodeEncoding = 'utf-8' | 'utf-16le' | 'utf-16be';

/** The encoding a byte-order mark announces; UTF-8 when there is none. */
export function unicodeEncoding(bytes: Uint8Array): UnicodeEncoding {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return 'utf-16le';
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return 'utf-16be';
  return 'utf-8';
}

function decodeStrict(bytes: Uint8Array, encoding: UnicodeEncoding): string {
  try {
    // The decoder drops the byte-order mark itself (ignoreBOM defaults to false).
    return new TextDecoder(encoding, { fatal: true }).decode(bytes);
  } catch (error) {
    if (encoding !== 'utf-8') throw new DocumentParseError(`the file is not valid ${encoding.toUpperCase()} text`, { cause: error });
    throw new DocumentParseError(
      looksBinary(bytes) ? 'the file is binary, not text' : 'the file is not UTF-8 text; save it as UTF-8 and upload it again',
      { cause: error },
    );
  }
}

/** NUL bytes in the first 8 KiB: an image, an archive, an office document. */
function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 8192).includes(0);
}
