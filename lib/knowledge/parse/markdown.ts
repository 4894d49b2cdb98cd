/**
 * Markdown as the text a reader sees: heading markers, emphasis, link targets of images and
 * HTML comments go; headings, list items, table rows and code stay as text. A section starts
 * at each heading (ATX `#` or setext underline) outside code, with the heading as its first
 * line, so a chunk rarely mixes the tail of one section with the start of the next.
 *
 * Line-based on purpose: the output keeps the source's lines (the chunker's default
 * delimiter), and a malformed document degrades to its own text instead of failing.
 */
import type { ParsedDocument } from '../types';
import { decodeText } from './text';

type Section = ParsedDocument['sections'][number];

export function parseMarkdown(bytes: Uint8Array): ParsedDocument {
  return { sections: markdownSections(decodeText(bytes)) };
}

/**
 * @example
 *   markdownSections('# A\ntext\n## B\nmore');
 *   // [{ text: 'A\ntext' }, { text: 'B\nmore' }]
 */
export function markdownSections(markdown: string): Section[] {
  const lines = stripFrontMatter(stripComments(markdown)).split('\n');
  const sections: string[][] = [[]];
  let fence: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (fence !== undefined) {
      if (isFenceClose(line, fence)) fence = undefined;
      else sections.at(-1)!.push(line);
      continue;
    }
    const opening = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (opening) {
      fence = opening[1]!;
      continue;
    }
    const atx = /^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (atx) {
      sections.push([inline(atx[1] ?? '')]);
      continue;
    }
    const next = lines[i + 1];
    if (next !== undefined && line.trim() !== '' && /^ {0,3}(=+|-+)[ \t]*$/.test(next) && !isListItem(line)) {
      sections.push([inline(line.trim())]);
      i++;
      continue;
    }
    if (/^ {0,3}([-*_])([ \t]*\1){2,}[ \t]*$/.test(line)) continue; // thematic break
    sections.at(-1)!.push(block(line));
  }
  return sections.map((section) => ({ text: section.join('\n').trim() })).filter((section) => section.text !== '');
}

/** One line outside code: block markers that carry no words go, list bullets stay. */
function block(line: string): string {
  let text = line.replace(/^( {0,3}>[ \t]?)+/, ''); // block quotes
  if (/^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*(\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$/.test(text)) return ''; // table rule
  text = text.replace(/^(\s*)([-*+]|\d{1,9}[.)])[ \t]+\[[ xX]\][ \t]+/, '$1$2 '); // task boxes
  return inline(text);
}

/**
 * Lines longer than this keep their inline markup: the patterns below are linear per attempt,
 * but a hostile line could still make them scan far, and such lines are rarely prose.
 */
const MAX_INLINE_LINE = 4096;

/** Inline markup as plain text; code spans keep their content as it is. */
function inline(text: string): string {
  if (text.length > MAX_INLINE_LINE) return text;
  if (!text.includes('`')) return prose(text);
  let out = '';
  let last = 0;
  for (const match of text.matchAll(/(`+)(?!`)(.+?)(?<!`)\1(?!`)/g)) {
    out += prose(text.slice(last, match.index)) + (match[2]!.trim() || match[2]!);
    last = match.index + match[0].length;
  }
  return out + prose(text.slice(last));
}

/** Escaped punctuation is held in private-use code points while markup is removed. */
const ESCAPE_BASE = 0xf0000;

function prose(text: string): string {
  let out = text;
  const escaped = out.includes('\\');
  if (escaped) out = out.replace(/\\([!-/:-@[-`{-~])/g, (_, char: string) => String.fromCodePoint(ESCAPE_BASE + char.charCodeAt(0)));
  if (out.includes('](')) {
    out = out
      .replace(/!\[([^[\]]*)\]\([^()]*\)/g, '$1') // images: their alt text
      .replace(/\[([^[\]]+)\]\((?:<([^<>]*)>|([^()\s]*))(?:\s+"[^"()]*")?\)/g, (_, label: string, angled?: string, bare?: string) => {
        const url = angled ?? bare ?? '';
        return url && url !== label && !url.startsWith('#') ? `${label} (${url})` : label;
      });
  }
  if (out.includes('][')) out = out.replace(/\[([^[\]]+)\]\[[^[\]]*\]/g, '$1'); // reference links
  if (out.includes('<http')) out = out.replace(/<(https?:\/\/[^<>\s]+)>/g, '$1'); // autolinks
  if (/[*_~]/.test(out)) out = out.replace(/\*+|_+|~~+/g, emphasis);
  if (escaped) out = out.replace(/[\u{F0021}-\u{F007E}]/gu, (char) => String.fromCharCode(char.codePointAt(0)! - ESCAPE_BASE));
  return out;
}

/**
 * An emphasis run goes when it touches a word on one side (`**bold**`, `~~gone~~`); it stays
 * between spaces (`2 * 3`), inside a word (`snake_case`, `a*b`) and when longer than three.
 * Runs are judged one by one, not paired: what a reader sees is the same, in linear time.
 */
function emphasis(run: string, offset: number, text: string): string {
  const before = text[offset - 1] ?? ' ';
  const after = text[offset + run.length] ?? ' ';
  const opens = !/\s/.test(after);
  const closes = !/\s/.test(before);
  if (!opens && !closes) return run;
  if (run.length > 3) return run;
  if (opens && closes && /[\p{L}\p{N}]/u.test(before) && /[\p{L}\p{N}]/u.test(after)) return run;
  return '';
}

function isFenceClose(line: string, fence: string): boolean {
  const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return close !== null && close[1]![0] === fence[0] && close[1]!.length >= fence.length;
}

function isListItem(line: string): boolean {
  return /^\s*([-*+]|\d{1,9}[.)])[ \t]/.test(line);
}

function stripComments(text: string): string {
  return text.includes('<!--') ? text.replace(/<!--[\s\S]*?-->/g, '') : text;
}

/** A YAML front-matter block is metadata, not text a reader sees. */
function stripFrontMatter(text: string): string {
  const match = /^---[ \t]*\n[\s\S]*?\n(---|\.\.\.)[ \t]*(\n|$)/.exec(text);
  return match ? text.slice(match[0].length) : text;
}
