/**
 * What an uploaded file is to a model: an image it can be shown (PNG, JPEG, GIF, WebP, told
 * by the bytes, whatever type the upload claimed), a document whose text can be read (plain
 * text, Markdown, CSV/TSV, JSON, HTML with the tags removed, XML, YAML), or neither (PDF,
 * Office files, archives, other binaries: reading those needs parsers and OCR this runtime does
 * not bundle).
 */
import type { ImageMimeType } from '../llm/types';
import { htmlToText } from './invoke';

export type FileKind =
  | { kind: 'image'; mime_type: ImageMimeType }
  | { kind: 'text'; text: string }
  | { kind: 'unreadable'; why: string };

/** What is read, for the marker of a file that is not. */
export const READABLE = 'PNG, JPEG, GIF and WebP images and text documents (plain text, Markdown, CSV, JSON, HTML, XML, YAML)';

/** The image format of `bytes`, from their signature. */
export function sniffImage(bytes: Uint8Array): ImageMimeType | undefined {
  const at = (i: number, ...values: number[]) => values.every((v, k) => bytes[i + k] === v);
  if (at(0, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return 'image/png';
  if (at(0, 0xff, 0xd8, 0xff)) return 'image/jpeg';
  if (at(0, 0x47, 0x49, 0x46, 0x38) && (bytes[4] === 0x37 || bytes[4] === 0x39) && bytes[5] === 0x61) return 'image/gif';
  if (at(0, 0x52, 0x49, 0x46, 0x46) && at(8, 0x57, 0x45, 0x42, 0x50)) return 'image/webp';
  return undefined;
}

const TEXT_EXTENSIONS = new Set(['txt', 'text', 'md', 'markdown', 'csv', 'tsv', 'json', 'jsonl', 'ndjson', 'xml', 'yaml', 'yml', 'log', 'html', 'htm']);
const IMAGE_EXTENSIONS = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp', 'bmp', 'tif', 'tiff', 'heic', 'heif', 'avif', 'ico']);

function extension(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot < 0 ? '' : name.slice(dot + 1).toLowerCase();
}

/** Whether a file, by its declared type or name, is meant as an image (before its bytes are read). */
export function looksLikeImage(mimeType: string, name: string): boolean {
  return mimeType.toLowerCase().startsWith('image/') || IMAGE_EXTENSIONS.has(extension(name));
}

function isHtml(mimeType: string, name: string): boolean {
  return /html/.test(mimeType) || ['html', 'htm'].includes(extension(name));
}

function isTextType(mimeType: string, name: string): boolean {
  const m = mimeType.toLowerCase();
  return m.startsWith('text/') || /json|xml|csv|yaml|markdown/.test(m) || TEXT_EXTENSIONS.has(extension(name));
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** UTF-8 text without NUL characters, else undefined (a binary). */
function decodeText(bytes: Uint8Array): string | undefined {
  try {
    const text = utf8.decode(bytes);
    return text.includes('\u0000') ? undefined : text;
  } catch {
    return undefined;
  }
}

/** Classifies a file from its bytes, declared type and name. */
export function classify(bytes: Uint8Array, mimeType: string, name: string): FileKind {
  const image = sniffImage(bytes);
  if (image) return { kind: 'image', mime_type: image };
  if (looksLikeImage(mimeType, name) && !/svg/.test(mimeType) && extension(name) !== 'svg') {
    return { kind: 'unreadable', why: 'only PNG, JPEG, GIF and WebP images can be shown to a model' };
  }
  const head = String.fromCharCode(...bytes.subarray(0, 5));
  if (head === '%PDF-') return { kind: 'unreadable', why: 'PDF text is not extracted here' };
  if (head.startsWith('PK\u0003\u0004')) return { kind: 'unreadable', why: 'Office documents and archives are not read here' };
  const text = decodeText(bytes);
  if (text === undefined) return { kind: 'unreadable', why: isTextType(mimeType, name) ? 'it is not UTF-8 text' : 'it is a binary file' };
  return { kind: 'text', text: isHtml(mimeType, name) ? htmlToText(text) : text };
}
