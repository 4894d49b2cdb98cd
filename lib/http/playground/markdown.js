// @ts-check
/**
 * Model output as the playground shows it: markdown parsed by marked, the HTML it gives
 * sanitized by DOMPurify before it reaches the page, and the citation markers of a knowledge
 * answer (`[ID:n]`, RAGFlow's) turned into numbered marks with the sources they name.
 *
 * build.ts bundles this module with both libraries (esbuild) into assets/markdown.js: the page
 * loads nothing from anywhere else. What a model writes is data. HTML written into the text is
 * shown as text, but for a few bare formatting tags (`<br>`, `<sub>`, ...): no attribute a
 * model wrote is ever parsed, so none can run, nor trip the page's CSP. What markdown makes is
 * sanitized all the same: no script, event handler, `javascript:` URL, style, form control,
 * frame or image survives, and links open in a new tab with `rel="noopener noreferrer"`.
 *
 * @example
 *   const { fragment, cited } = renderMarkdown('## Hi\n- one [ID:3]', reference);
 *   element.replaceChildren(fragment); // cited: the chunks of reference.chunks["3"], in order
 */
import DOMPurify from 'dompurify';
import { Marked } from 'marked';

/** @typedef {{id?: string, content?: string | null, document_name?: string | null, url?: string | null, [field: string]: unknown}} Chunk */
/** @typedef {{chunks?: Record<string, Chunk>, doc_aggs?: Record<string, {doc_name?: string, count?: number}>}} Reference */

/** @param {string} text */
const escapeHtml = (text) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A formatting tag with no attribute: kept as markup. */
const FORMATTING_TAG = /^<\/?(br|b|i|u|s|em|strong|sub|sup|kbd|mark|small|del|ins)\s*\/?>$/i;

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    // the page's policy loads no image from elsewhere: an image is shown as a link to it
    image({ href, text }) {
      return `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`;
    },
    // HTML in the text is text, but for bare formatting tags, which carry no attribute
    html({ text }) {
      return FORMATTING_TAG.test(text) ? text : escapeHtml(text);
    },
  },
});

/** Markup a model may use; anything else is dropped with its content (scripts) or unwrapped. */
const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'img', 'picture', 'source', 'video', 'audio', 'track', 'iframe', 'frame', 'object', 'embed', 'form', 'input', 'button', 'textarea', 'select', 'option', 'label', 'link', 'meta', 'base', 'dialog', 'template'],
  // `style` would break the page's CSP; `class` and `id` would let text dress up as the page
  FORBID_ATTR: ['style', 'class', 'id', 'name', 'srcset', 'formaction'],
  ALLOW_DATA_ATTR: false,
  ADD_ATTR: ['target'],
  RETURN_DOM_FRAGMENT: /** @type {const} */ (true),
};

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node instanceof HTMLAnchorElement && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  } else if (node instanceof HTMLAnchorElement) {
    node.removeAttribute('target');
  }
});

const CITATION = /\[ID:\s*(\d+)\]/g;

/**
 * `text` as sanitized HTML. With `reference` (a `message_end`'s), each `[ID:n]` whose chunk it
 * holds becomes a numbered mark (`<sup class="cite">`), numbered in order of first citation;
 * `cited` lists those chunks in that order.
 * @param {string} text
 * @param {Reference | null} [reference]
 * @returns {{fragment: DocumentFragment, cited: Chunk[]}}
 */
export function renderMarkdown(text, reference = null) {
  const html = /** @type {string} */ (marked.parse(text));
  const fragment = /** @type {DocumentFragment} */ (/** @type {unknown} */ (DOMPurify.sanitize(html, PURIFY)));
  /** @type {Chunk[]} */
  const cited = [];
  const chunks = reference?.chunks;
  if (!chunks) return { fragment, cited };
  /** @type {Map<string, number>} */
  const numbers = new Map();
  /** @type {Text[]} */
  const texts = [];
  const walker = document.createTreeWalker(fragment, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    // a marker inside code is the model quoting one
    if (node.parentElement?.closest('code, pre')) continue;
    if (node instanceof Text && CITATION.test(node.data)) texts.push(node);
    CITATION.lastIndex = 0;
  }
  for (const node of texts) {
    /** @type {(Node | string)[]} */
    const parts = [];
    let at = 0;
    for (const match of node.data.matchAll(CITATION)) {
      const id = match[1] ?? '';
      const chunk = Object.hasOwn(chunks, id) ? chunks[id] : undefined;
      if (!chunk) continue;
      let n = numbers.get(id);
      if (n === undefined) {
        cited.push(chunk);
        n = cited.length;
        numbers.set(id, n);
      }
      parts.push(node.data.slice(at, match.index));
      const mark = document.createElement('sup');
      mark.className = 'cite';
      mark.textContent = String(n);
      mark.title = `${chunk.document_name ?? 'source'}: ${(chunk.content ?? '').slice(0, 160)}`;
      parts.push(mark);
      at = (match.index ?? 0) + match[0].length;
    }
    if (parts.length === 0) continue;
    parts.push(node.data.slice(at));
    node.replaceWith(...parts);
  }
  return { fragment, cited };
}
