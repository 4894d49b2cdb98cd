/**
 * PDF text with Mozilla's PDF.js (pdfjs-dist, legacy build for Node), one section per page.
 * Only the text layer is read: nothing is rendered, no fonts are loaded, and no OCR is done, so
 * a scanned document fails with that reason instead of yielding nothing.
 *
 * PDF.js (~3 MB of code) is imported on the first PDF, never at module load. Its worker runs in
 * this thread: it is imported beside the library (`globalThis.pdfjsWorker`), which bundlers can
 * see, rather than by a file path at run time. It loads in a bundle without its optional native
 * canvas package (see withMatrixStandIn); it then logs once that rendering is unavailable.
 */
import { existsSync } from 'node:fs';
// Renamed: ESM bundles often declare their own `createRequire` in a banner.
import { createRequire as requireFrom } from 'node:module';
import { dirname, join } from 'node:path';
import type { ParsedDocument } from '../types';
import { DocumentParseError } from './errors';
import { MAX_PDF_PAGES, TextBudget } from './limits';

type PdfJs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');

let pdfjs: Promise<PdfJs> | undefined;

function loadPdfJs(): Promise<PdfJs> {
  pdfjs ??= (async () => {
    const worker = await import('pdfjs-dist/legacy/build/pdf.worker.mjs');
    (globalThis as { pdfjsWorker?: unknown }).pdfjsWorker = worker;
    return withMatrixStandIn(() => import('pdfjs-dist/legacy/build/pdf.mjs'));
  })().catch((error: unknown) => {
    pdfjs = undefined;
    throw error;
  });
  return pdfjs;
}

/**
 * PDF.js's display layer makes a `DOMMatrix` as it loads, for rendering, which we never do.
 * Node has none; PDF.js borrows one from @napi-rs/canvas, a 30 MB native package that a Lambda
 * bundle does not carry, and without it the import throws. A stand-in with the identity's fields
 * lets it load, and is removed once it has, so nothing else in the process sees it.
 */
async function withMatrixStandIn<T>(load: () => Promise<T>): Promise<T> {
  const global = globalThis as { DOMMatrix?: unknown };
  if (global.DOMMatrix !== undefined) return load();
  class IdentityMatrix {
    a = 1;
    b = 0;
    c = 0;
    d = 1;
    e = 0;
    f = 0;
  }
  global.DOMMatrix = IdentityMatrix;
  try {
    return await load();
  } finally {
    if (global.DOMMatrix === IdentityMatrix) delete global.DOMMatrix;
  }
}

/**
 * Where pdfjs-dist's `cmaps/` and `standard_fonts/` are: the installed package by default. A
 * PDF whose fonts use one of the predefined CMaps (common in Chinese, Japanese and Korean
 * documents) has no readable text without them. A bundle that does not carry the package can
 * ship those two folders and name their parent with setPdfResourceDirectory.
 */
/** `null`: not looked up yet; `undefined`: looked up and not found. */
let resourceDirectory: string | undefined | null = null;

/** The folder holding pdfjs-dist's `cmaps/` and `standard_fonts/` (for bundles without the package). */
export function setPdfResourceDirectory(directory: string): void {
  resourceDirectory = directory;
}

function resources(): { cMapUrl?: string; cMapPacked?: boolean; standardFontDataUrl?: string } {
  if (resourceDirectory === null) {
    try {
      resourceDirectory = dirname(requireFrom(import.meta.url).resolve('pdfjs-dist/package.json'));
    } catch {
      resourceDirectory = undefined;
    }
  }
  if (resourceDirectory === undefined) return {};
  const cmaps = join(resourceDirectory, 'cmaps');
  const fonts = join(resourceDirectory, 'standard_fonts');
  return {
    ...(existsSync(cmaps) ? { cMapUrl: `${cmaps}/`, cMapPacked: true } : {}),
    ...(existsSync(fonts) ? { standardFontDataUrl: `${fonts}/` } : {}),
  };
}

export async function parsePdf(bytes: Uint8Array, options: { signal?: AbortSignal } = {}): Promise<ParsedDocument> {
  const { signal } = options;
  if (!isPdf(bytes)) throw new DocumentParseError('the file is not a PDF');
  signal?.throwIfAborted();
  const { getDocument } = await loadPdfJs();
  // PDF.js takes ownership of (and detaches) the buffer it is given: hand it a copy.
  const task = getDocument({
    data: bytes.slice(),
    ...resources(),
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    stopAtErrors: false,
    verbosity: 0,
  });
  const abort = (): void => void task.destroy();
  signal?.addEventListener('abort', abort, { once: true });
  try {
    const document = await task.promise.catch((error: unknown) => {
      throw openFailure(error);
    });
    if (document.numPages > MAX_PDF_PAGES) {
      throw new DocumentParseError(`the PDF has ${document.numPages} pages; at most ${MAX_PDF_PAGES} are parsed`);
    }
    const budget = new TextBudget();
    const sections: ParsedDocument['sections'] = [];
    for (let number = 1; number <= document.numPages; number++) {
      signal?.throwIfAborted();
      const page = await document.getPage(number);
      const content = await page.getTextContent();
      const text = pageText(content.items);
      page.cleanup();
      budget.add(text);
      if (text !== '') sections.push({ text, page: number });
    }
    if (sections.length === 0) {
      throw new DocumentParseError('the PDF has no text layer; scanned documents are not supported');
    }
    return { sections };
  } catch (error) {
    signal?.throwIfAborted();
    if (error instanceof DocumentParseError) throw error;
    throw new DocumentParseError('the PDF could not be read; it may be damaged', { cause: error });
  } finally {
    signal?.removeEventListener('abort', abort);
    await task.destroy();
  }
}

/** A PDF starts with `%PDF-` (tolerating up to 1 KiB of junk before it, as readers do). */
function isPdf(bytes: Uint8Array): boolean {
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 1024 + 5));
  return head.includes('%PDF-');
}

function openFailure(error: unknown): DocumentParseError {
  const name = error instanceof Error ? error.name : '';
  if (name === 'PasswordException') {
    return new DocumentParseError('the PDF is encrypted with a password; upload an unprotected copy', { cause: error });
  }
  if (name === 'InvalidPDFException') {
    return new DocumentParseError('the file is not a valid PDF; it may be damaged', { cause: error });
  }
  return new DocumentParseError('the PDF could not be opened; it may be damaged', { cause: error });
}

/**
 * A page's text items in reading order: PDF.js marks line ends (`hasEOL`); items of one line
 * that carry no space between them are joined as they are (a word may be split across items).
 */
function pageText(items: readonly unknown[]): string {
  let text = '';
  for (const item of items) {
    if (typeof item !== 'object' || item === null || !('str' in item)) continue;
    const { str, hasEOL } = item as { str: string; hasEOL?: boolean };
    text += str;
    if (hasEOL) text += '\n';
  }
  return text
    .split('\n')
    .map((line) => line.replace(/[ \t\u00a0]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
