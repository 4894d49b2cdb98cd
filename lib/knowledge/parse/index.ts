/**
 * Documents of a `local` knowledge base, from bytes to text: plain text (and text-like formats
 * such as CSV, JSON, logs and source code, read as they are), Markdown, HTML and PDF. Each
 * parser is its own file; PDF.js and the tokenizer load on first use only.
 *
 * @example
 *   const kind = documentKind('guide.md', 'application/octet-stream'); // 'markdown'
 *   if (!kind) throw new Error(`unsupported; use one of ${SUPPORTED_EXTENSIONS.join(' ')}`);
 *   const doc = await parseDocument(bytes, kind, { signal });
 *   const chunks = naiveChunk(doc, settings);
 */
import type { ParsedDocument } from '../types';
import { loadTokenizer } from '../tokens';
import { DocumentParseError } from './errors';
import { parseHtml } from './html';
import { checkDocumentSize } from './limits';
import { parseMarkdown } from './markdown';
import { parsePdf } from './pdf';
import { parseText } from './text';

export { DocumentParseError } from './errors';
export { MAX_PARSED_BYTES, MAX_DOCUMENT_CHARS, MAX_HTML_DEPTH, MAX_PDF_PAGES } from './limits';
export { htmlToText } from './html';
export { setPdfResourceDirectory } from './pdf';

export type DocumentKind = 'text' | 'markdown' | 'html' | 'pdf';

/**
 * Extensions read as plain text: prose, data (CSV, TSV, JSON Lines, YAML, ...), logs and the
 * source files RAGFlow's naive chunker reads as text. Each is indexed as it is written; no
 * format is interpreted (a CSV's rows are its lines).
 */
const TEXT_EXTENSIONS = [
  '.txt', '.text', '.log', '.csv', '.tsv', '.json', '.jsonl', '.ndjson', '.yaml', '.yml', '.toml', '.ini', '.cfg',
  '.conf', '.properties', '.env', '.rst', '.adoc', '.tex', '.srt', '.vtt',
  '.py', '.js', '.mjs', '.cjs', '.ts', '.tsx', '.jsx', '.java', '.kt', '.scala', '.go', '.rs', '.c', '.h', '.cc',
  '.cpp', '.hpp', '.cs', '.php', '.rb', '.swift', '.sh', '.bash', '.sql', '.r', '.lua', '.pl',
] as const;

const EXTENSION_KINDS: ReadonlyMap<string, DocumentKind> = new Map<string, DocumentKind>([
  ...TEXT_EXTENSIONS.map((extension) => [extension, 'text'] as const),
  ['.md', 'markdown'],
  ['.markdown', 'markdown'],
  ['.mdx', 'markdown'],
  ['.html', 'html'],
  ['.htm', 'html'],
  ['.xhtml', 'html'],
  ['.pdf', 'pdf'],
]);

/** For error messages and docs: every extension a `local` knowledge base parses. */
export const SUPPORTED_EXTENSIONS: readonly string[] = Object.freeze([
  '.txt', '.md', '.markdown', '.mdx', '.html', '.htm', '.xhtml', '.pdf',
  ...TEXT_EXTENSIONS.filter((extension) => extension !== '.txt'),
]);

const MIME_KINDS: ReadonlyMap<string, DocumentKind> = new Map<string, DocumentKind>([
  ['text/plain', 'text'],
  ['text/csv', 'text'],
  ['text/tab-separated-values', 'text'],
  ['application/json', 'text'],
  ['application/x-ndjson', 'text'],
  ['application/jsonl', 'text'],
  ['application/yaml', 'text'],
  ['text/yaml', 'text'],
  ['text/markdown', 'markdown'],
  ['text/x-markdown', 'markdown'],
  ['text/html', 'html'],
  ['application/xhtml+xml', 'html'],
  ['application/pdf', 'pdf'],
  ['application/x-pdf', 'pdf'],
]);

/**
 * The kind from the file name's extension and the declared MIME type; undefined = unsupported.
 * A known extension decides (clients often send a generic or wrong type); a name without one
 * the MIME type decides; a name with an unknown extension is unsupported, whatever the type
 * (a `.docx` sent as `text/plain` would only fail later).
 */
export function documentKind(name: string, mimeType: string): DocumentKind | undefined {
  const extension = extensionOf(name);
  if (extension !== undefined) return EXTENSION_KINDS.get(extension);
  return MIME_KINDS.get(mimeType.split(';')[0]!.trim().toLowerCase());
}

/** The lower-cased extension with its dot (`.md`), or undefined when the name has none. */
function extensionOf(name: string): string | undefined {
  const base = name.slice(Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\')) + 1);
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(dot).toLowerCase() : undefined;
}

/**
 * Parses a document of the given kind. Throws DocumentParseError with a reason a user reads;
 * an aborted signal rejects with its reason. Also loads the tokenizer, so `naiveChunk` can run
 * right after.
 */
export async function parseDocument(bytes: Uint8Array, kind: DocumentKind, options: { signal?: AbortSignal } = {}): Promise<ParsedDocument> {
  options.signal?.throwIfAborted();
  checkDocumentSize(bytes);
  const [doc] = await Promise.all([parseKind(bytes, kind, options), loadTokenizer()]);
  if (doc.sections.length === 0) throw new DocumentParseError('the document has no text');
  return doc;
}

async function parseKind(bytes: Uint8Array, kind: DocumentKind, options: { signal?: AbortSignal }): Promise<ParsedDocument> {
  switch (kind) {
    case 'text':
      return dropBlank(parseText(bytes));
    case 'markdown':
      return parseMarkdown(bytes);
    case 'html':
      return parseHtml(bytes);
    case 'pdf':
      return parsePdf(bytes, options);
  }
}

function dropBlank(doc: ParsedDocument): ParsedDocument {
  return { sections: doc.sections.filter((section) => section.text.trim() !== '') };
}
