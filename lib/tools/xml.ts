/**
 * Services' XML answers (arXiv's Atom feed, PubMed's article sets) as a small element tree,
 * built with htmlparser2's streaming parser in XML mode: names keep their case and prefix
 * (`arxiv:doi`), entities and CDATA are decoded, and the parser loads on first use.
 *
 * @example
 *   const feed = await parseXml(res.body);
 *   for (const entry of childElements(firstElement(feed, 'feed'), 'entry')) textOf(firstElement(entry, 'title'));
 */

/** One element: its name as written, its attributes, and its children in document order. */
export interface XmlElement {
  readonly name: string;
  readonly attributes: Readonly<Record<string, string>>;
  readonly children: readonly XmlNode[];
}

export type XmlNode = XmlElement | string;

/** Deeper nesting than any service's answer has; past it the answer is refused, not parsed quadratically. */
export const MAX_XML_DEPTH = 256;

/** The answer could not be read as XML; the caller names the service. */
export class XmlParseError extends Error {}

let loading: Promise<typeof import('htmlparser2')> | undefined;
const loadParser = () => (loading ??= import('htmlparser2'));

/** The document as a root element named `#document` whose children are the top-level nodes. */
export async function parseXml(text: string): Promise<XmlElement> {
  const { Parser } = await loadParser();
  const root: { name: string; attributes: Record<string, string>; children: XmlNode[] } = { name: '#document', attributes: {}, children: [] };
  const open = [root];
  let failure: string | undefined;
  const parser = new Parser(
    {
      onopentag(name, attributes) {
        if (open.length > MAX_XML_DEPTH) {
          failure ??= `elements nest deeper than ${MAX_XML_DEPTH}`;
          return;
        }
        const element = { name, attributes, children: [] as XmlNode[] };
        open.at(-1)!.children.push(element);
        open.push(element);
      },
      ontext(text) {
        if (!failure) open.at(-1)!.children.push(text);
      },
      onclosetag(name) {
        if (open.length > 1 && open.at(-1)!.name === name) open.pop();
      },
    },
    { xmlMode: true, decodeEntities: true },
  );
  parser.end(text);
  if (failure) throw new XmlParseError(failure);
  return root;
}

/** The element's child elements, those named `name` when given. */
export function childElements(element: XmlElement | undefined, name?: string): XmlElement[] {
  if (!element) return [];
  return element.children.filter((c): c is XmlElement => typeof c !== 'string' && (name === undefined || c.name === name));
}

/** The first child element named `name`, or the first along a path of names (`'Article', 'Journal', 'Title'`). */
export function firstElement(element: XmlElement | undefined, ...path: string[]): XmlElement | undefined {
  let node = element;
  for (const name of path) {
    node = node?.children.find((c): c is XmlElement => typeof c !== 'string' && c.name === name);
    if (!node) return undefined;
  }
  return node;
}

/** Every element named `name` below `element`, in document order. */
export function descendants(element: XmlElement | undefined, name: string): XmlElement[] {
  const found: XmlElement[] = [];
  const stack = element ? [...childElements(element)].reverse() : [];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (node.name === name) found.push(node);
    stack.push(...childElements(node).reverse());
  }
  return found;
}

/** All the text inside `element`, markup dropped (`<i>in vivo</i> study` reads "in vivo study"). */
export function textOf(element: XmlElement | undefined): string {
  if (!element) return '';
  let text = '';
  const stack: XmlNode[] = [...element.children].reverse();
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (typeof node === 'string') text += node;
    else stack.push(...[...node.children].reverse());
  }
  return text;
}

/** The text with runs of whitespace (a feed's hard-wrapped lines) made one space, trimmed. */
export function collapsedText(element: XmlElement | undefined): string {
  return textOf(element).replace(/\s+/g, ' ').trim();
}
