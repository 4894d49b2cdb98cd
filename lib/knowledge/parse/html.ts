/**
 * HTML as the text a reader sees, with htmlparser2's streaming parser: it is forgiving with
 * broken markup, decodes entities, and builds no DOM, so memory stays linear in the text kept
 * and nesting cannot overflow a stack (node-html-parser builds a tree first; we need none).
 *
 * Scripts, styles, navigation, forms' controls, embedded objects and hidden elements are
 * dropped; block elements end lines, list items keep a bullet, a table row's cells share a line
 * joined with ` | `, whitespace collapses as a browser collapses it (except in `<pre>`). The `<title>`
 * leads the text. A section starts at each heading.
 */
import { Parser } from 'htmlparser2';
import type { ParsedDocument } from '../types';
import { DocumentParseError } from './errors';
import { MAX_HTML_DEPTH, TextBudget } from './limits';
import { normalizeNewlines, unicodeEncoding } from './text';

type Section = ParsedDocument['sections'][number];

/** Elements whose content is never text for a reader. */
export const SKIPPED = new Set([
  'script', 'style', 'noscript', 'template', 'head', 'svg', 'canvas', 'iframe', 'object', 'embed',
  'nav', 'select', 'button', 'textarea', 'datalist', 'dialog', 'map', 'audio', 'video', 'picture', 'frameset',
]);

/** ARIA roles of page furniture. */
const SKIPPED_ROLES = new Set(['navigation', 'banner', 'contentinfo', 'search', 'menu', 'menubar', 'toolbar']);

/** Elements that end a line before and after them. */
export const BLOCKS = new Set([
  'address', 'article', 'aside', 'blockquote', 'body', 'caption', 'center', 'dd', 'details', 'dialog', 'dir', 'div', 'dl',
  'dt', 'fieldset', 'figcaption', 'figure', 'footer', 'form', 'header', 'hgroup', 'hr', 'html', 'legend', 'li', 'main',
  'menu', 'ol', 'p', 'pre', 'section', 'summary', 'table', 'tbody', 'tfoot', 'thead', 'tr', 'ul',
]);

export const HEADINGS = new Set(['h1', 'h2', 'h3', 'h4', 'h5', 'h6']);

/**
 * The page's text, its title first. Throws DocumentParseError past MAX_DOCUMENT_CHARS of text
 * or MAX_HTML_DEPTH of nesting.
 *
 * @example
 *   htmlToText('<title>T</title><p>a &amp; b</p><script>x()</script>'); // 'T\na & b'
 */
export function htmlToText(html: string): string {
  return htmlSections(html)
    .map((section) => section.text)
    .join('\n\n');
}

export function parseHtml(bytes: Uint8Array): ParsedDocument {
  return { sections: htmlSections(decodeHtml(bytes)) };
}

/** The page's sections: the title and what precedes the first heading, then one per heading. */
export function htmlSections(html: string): Section[] {
  const budget = new TextBudget();
  const sections: string[][] = [[]];
  /** Each open element, and whether it is one that drops its content. */
  const open: { name: string; skipped: boolean }[] = [];
  let skipping = 0;
  let preformatted = 0;
  let line = '';
  let title = '';
  let inTitle = false;
  let cellsInRow = 0;

  const endLine = (): void => {
    // Inside <pre> a line's indentation is part of it.
    const text = preformatted > 0 ? line.trimEnd() : line.trim();
    line = '';
    if (text.trim() === '') return;
    budget.add(text);
    sections.at(-1)!.push(text);
  };
  const write = (text: string): void => {
    if (preformatted > 0) {
      const lines = normalizeNewlines(text).split('\n');
      line += lines[0];
      for (const next of lines.slice(1)) {
        endLine();
        line = next;
      }
      return;
    }
    const collapsed = text.replace(/[ \t\n\f\r]+/g, ' ');
    line += line.endsWith(' ') && collapsed.startsWith(' ') ? collapsed.slice(1) : collapsed;
  };

  const parser = new Parser(
    {
      onopentag(name, attributes) {
        if (name === 'title' && skipping <= 1 && open.every((element) => element.name === 'head' || element.name === 'html')) {
          inTitle = true;
        }
        if (open.length >= MAX_HTML_DEPTH) {
          throw new DocumentParseError(`the HTML nests elements more than ${MAX_HTML_DEPTH} deep`);
        }
        const skipped = SKIPPED.has(name) || isHidden(attributes);
        open.push({ name, skipped });
        if (skipped) skipping++;
        if (skipping > 0) return;
        if (HEADINGS.has(name)) {
          endLine();
          sections.push([]);
        } else if (BLOCKS.has(name) || name === 'br') {
          endLine();
        }
        if (name === 'pre') preformatted++;
        else if (name === 'li') line = '- ';
        else if (name === 'tr') cellsInRow = 0;
        else if (name === 'td' || name === 'th') {
          // A row's cells share its line.
          if (cellsInRow++ > 0) line = `${line.trimEnd()} | `;
        } else if (name === 'img' && attributes.alt?.trim()) write(` ${attributes.alt.trim()} `);
      },
      ontext(text) {
        if (inTitle) title += text;
        else if (skipping === 0) write(text);
      },
      onclosetag(name) {
        if (name === 'title') inTitle = false;
        const index = open.findLastIndex((element) => element.name === name);
        if (index < 0) return;
        for (const element of open.splice(index).reverse()) {
          if (element.skipped) skipping--;
          else if (skipping === 0) {
            if (HEADINGS.has(element.name) || BLOCKS.has(element.name)) endLine();
            if (element.name === 'pre') preformatted--;
          }
        }
      },
    },
    { decodeEntities: true },
  );

  parser.write(html);
  parser.end();
  endLine();

  const titleText = title.replace(/\s+/g, ' ').trim();
  if (titleText) sections[0]!.unshift(titleText);
  return sections.map((section) => ({ text: section.join('\n') })).filter((section) => section.text !== '');
}

/** Hidden, or page furniture by its ARIA role. */
export function isHidden(attributes: Record<string, string>): boolean {
  if (attributes.hidden !== undefined || attributes['aria-hidden'] === 'true') return true;
  const role = attributes.role?.trim().toLowerCase();
  return role !== undefined && SKIPPED_ROLES.has(role);
}

/**
 * Decodes an HTML file's bytes: a byte-order mark first, then a `<meta charset>` in its first
 * 1 KiB (as browsers look), else UTF-8. Invalid bytes become U+FFFD, as a browser shows them.
 */
export function decodeHtml(bytes: Uint8Array): string {
  if (bytes.subarray(0, 8192).includes(0) && unicodeEncoding(bytes) === 'utf-8') {
    throw new DocumentParseError('the file is binary, not HTML');
  }
  const encoding = unicodeEncoding(bytes) !== 'utf-8' ? unicodeEncoding(bytes) : (declaredCharset(bytes) ?? 'utf-8');
  try {
    return new TextDecoder(encoding).decode(bytes);
  } catch {
    // A label the platform does not know (a typo, an exotic charset): UTF-8, as browsers fall back.
    return new TextDecoder('utf-8').decode(bytes);
  }
}

function declaredCharset(bytes: Uint8Array): string | undefined {
  const head = new TextDecoder('latin1').decode(bytes.subarray(0, 1024));
  const match = /<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)/i.exec(head);
  return match?.[1]?.toLowerCase();
}
