/**
 * Two more views of a web page beside `htmlToText` (./html.ts), with the same streaming parser
 * and the same idea of what a reader never sees (scripts, styles, navigation, forms' controls,
 * hidden elements): Markdown, which keeps headings, links, lists, quotes and code, and cleaned
 * HTML, which keeps the elements and only the attributes that carry content. They are what
 * RAGFlow's Crawler hands the model for `extract_type` `markdown` and `html`.
 *
 * Both are bounded like every parser here: MAX_HTML_DEPTH of nesting, MAX_DOCUMENT_CHARS of
 * output, past which they throw DocumentParseError.
 */
import { Parser } from 'htmlparser2';
import { DocumentParseError } from './errors';
import { BLOCKS, HEADINGS, isHidden, SKIPPED } from './html';
import { MAX_HTML_DEPTH, TextBudget } from './limits';
import { normalizeNewlines } from './text';

export interface HtmlViewOptions {
  /** The page's URL, against which relative links and images are resolved. */
  baseUrl?: string;
}

/**
 * The page as Markdown: `#` headings, `[text](url)` links (absolute against `baseUrl`; other
 * than http(s) and mailto dropped, their text kept), `![alt](src)` images, `-` and `1.` list
 * items, `>` quotes, fenced `<pre>` and backticked `<code>`; table cells joined with ` | `.
 *
 * @example
 *   htmlToMarkdown('<h2>Fares</h2><p>See <a href="/fares">the list</a>.</p>', { baseUrl: 'https://bus.example/' });
 *   // '## Fares\n\nSee [the list](https://bus.example/fares).'
 */
export function htmlToMarkdown(html: string, options: HtmlViewOptions = {}): string {
  const budget = new TextBudget();
  const blocks: string[] = [];
  const open: { name: string; skipped: boolean; link?: { href: string; start: number; line: number } }[] = [];
  const lists: { ordered: boolean; count: number }[] = [];
  let skipping = 0;
  let preformatted = 0;
  let quotes = 0;
  let line = '';
  let prefix = '';
  let lineNumber = 0;
  let cellsInRow = 0;

  const push = (text: string): void => {
    budget.add(text);
    blocks.push(text);
  };
  const endLine = (): void => {
    const text = preformatted > 0 ? line.trimEnd() : line.trim();
    line = '';
    lineNumber++;
    // An empty line keeps its bullet for the text that follows (`<li><p>text</p></li>`).
    if (text.trim() === '' && preformatted === 0) return;
    push(`${'> '.repeat(quotes)}${prefix}${text}`);
    prefix = '';
  };
  const paragraph = (): void => {
    endLine();
    if (blocks.length > 0 && blocks.at(-1) !== '') blocks.push('');
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
  const resolve = (href: string | undefined): string | undefined => resolveLink(href, options.baseUrl);

  const parser = new Parser(
    {
      onopentag(name, attributes) {
        if (open.length >= MAX_HTML_DEPTH) throw new DocumentParseError(`the HTML nests elements more than ${MAX_HTML_DEPTH} deep`);
        const skipped = SKIPPED.has(name) || isHidden(attributes);
        const element: (typeof open)[number] = { name, skipped };
        open.push(element);
        if (skipped) skipping++;
        if (skipping > 0) return;
        if (HEADINGS.has(name)) {
          paragraph();
          prefix = `${'#'.repeat(Number(name[1]))} `;
        } else if (name === 'pre') {
          paragraph();
          push('```');
          preformatted++;
        } else if (name === 'p' || name === 'blockquote' || name === 'table' || name === 'ul' || name === 'ol') {
          if (lists.length === 0) paragraph();
          else endLine();
          if (name === 'blockquote') quotes++;
          if (name === 'ul' || name === 'ol') lists.push({ ordered: name === 'ol', count: 0 });
        } else if (BLOCKS.has(name) || name === 'br') {
          endLine();
          if (name === 'hr') push('---');
        }
        if (name === 'li') {
          const list = lists.at(-1);
          const indent = '  '.repeat(Math.max(0, lists.length - 1));
          prefix = `${indent}${list?.ordered ? `${++list.count}.` : '-'} `;
        } else if (name === 'tr') cellsInRow = 0;
        else if (name === 'td' || name === 'th') {
          if (cellsInRow++ > 0) line = `${line.trimEnd()} | `;
        } else if (name === 'a') {
          const href = resolve(attributes.href);
          if (href) element.link = { href, start: line.length, line: lineNumber };
        } else if (name === 'img') {
          const alt = attributes.alt?.trim() ?? '';
          const src = resolve(attributes.src);
          if (src) write(` ![${alt}](${src}) `);
          else if (alt) write(` ${alt} `);
        } else if (name === 'code' && preformatted === 0) write('`');
      },
      ontext(text) {
        if (skipping === 0) write(text);
      },
      onclosetag(name) {
        const index = open.findLastIndex((element) => element.name === name);
        if (index < 0) return;
        for (const element of open.splice(index).reverse()) {
          if (element.skipped) {
            skipping--;
            continue;
          }
          if (skipping > 0) continue;
          if (element.name === 'pre') {
            endLine();
            preformatted--;
            push('```');
            paragraph();
          } else if (HEADINGS.has(element.name) || element.name === 'table') paragraph();
          else if (element.name === 'p') {
            if (lists.length === 0) paragraph();
            else endLine();
          }
          else if (element.name === 'blockquote') {
            paragraph();
            quotes--;
          } else if (element.name === 'ul' || element.name === 'ol') {
            endLine();
            lists.pop();
            if (lists.length === 0) paragraph();
          } else if (BLOCKS.has(element.name)) endLine();
          else if (element.name === 'code' && preformatted === 0) line += '`';
          if (HEADINGS.has(element.name) || element.name === 'li') prefix = '';
          else if (element.link && element.link.line === lineNumber) {
            const { href, start } = element.link;
            line = line.slice(0, start) + line.slice(start).replace(/^(\s*)(\S[\s\S]*?)(\s*)$/, (_, lead: string, text: string, trail: string) => `${lead}[${text}](${href})${trail}`);
          }
        }
      },
    },
    { decodeEntities: true },
  );
  parser.write(html);
  parser.end();
  endLine();
  while (blocks.at(-1) === '') blocks.pop();
  return blocks.join('\n');
}

/** Elements without content or end tag. */
const VOID = new Set(['area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr']);
/** Attributes that carry content (where a link goes, what an image shows, a cell's span); the rest is styling or script. */
const KEPT_ATTRIBUTES: Readonly<Record<string, readonly string[]>> = {
  a: ['href', 'title'],
  img: ['src', 'alt', 'title'],
  td: ['colspan', 'rowspan'],
  th: ['colspan', 'rowspan', 'scope'],
  ol: ['start'],
  abbr: ['title'],
};
/** Dropped with their content besides SKIPPED: form controls, and what only the browser reads. */
const DROPPED = new Set(['input', 'link', 'meta', 'base', 'source', 'track', 'area']);

/**
 * The page's HTML without what a reader never sees, comments, and every attribute but those
 * that carry content (links absolute against `baseUrl`; script URLs dropped).
 *
 * @example
 *   cleanHtml('<div class="x" onclick="go()"><p style="color:red">Hi <a href="/a">there</a></p><script>x()</script></div>', { baseUrl: 'https://s.example/' });
 *   // '<div><p>Hi <a href="https://s.example/a">there</a></p></div>'
 */
export function cleanHtml(html: string, options: HtmlViewOptions = {}): string {
  const budget = new TextBudget();
  const out: string[] = [];
  const open: { name: string; skipped: boolean }[] = [];
  let skipping = 0;
  const emit = (text: string): void => {
    budget.add(text);
    out.push(text);
  };

  const parser = new Parser(
    {
      onopentag(name, attributes) {
        if (open.length >= MAX_HTML_DEPTH) throw new DocumentParseError(`the HTML nests elements more than ${MAX_HTML_DEPTH} deep`);
        const skipped = SKIPPED.has(name) || DROPPED.has(name) || name === 'title' || isHidden(attributes);
        open.push({ name, skipped });
        if (skipped) skipping++;
        if (skipping > 0) return;
        let tag = `<${name}`;
        for (const attribute of KEPT_ATTRIBUTES[name] ?? []) {
          let value = attributes[attribute];
          if (value === undefined) continue;
          if (attribute === 'href' || attribute === 'src') value = resolveLink(value, options.baseUrl);
          if (value !== undefined) tag += ` ${attribute}="${escapeAttribute(value)}"`;
        }
        emit(`${tag}>`);
      },
      ontext(text) {
        if (skipping === 0) emit(escapeText(text));
      },
      onclosetag(name) {
        const index = open.findLastIndex((element) => element.name === name);
        if (index < 0) return;
        for (const element of open.splice(index).reverse()) {
          if (element.skipped) skipping--;
          else if (skipping === 0 && !VOID.has(element.name)) emit(`</${element.name}>`);
        }
      },
    },
    { decodeEntities: true },
  );
  parser.write(html);
  parser.end();
  // Runs of blank space between elements say nothing in HTML.
  return out.join('').replace(/[ \t\f\r]*\n\s*\n[\s]*/g, '\n').trim();
}

/** `href` as an absolute http(s) or mailto URL, or undefined (a script URL, a fragment, nonsense). */
function resolveLink(href: string | undefined, baseUrl: string | undefined): string | undefined {
  const raw = href?.trim();
  if (!raw || raw.startsWith('#')) return undefined;
  try {
    const url = baseUrl ? new URL(raw, baseUrl) : new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' || url.protocol === 'mailto:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}

function escapeText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
}
