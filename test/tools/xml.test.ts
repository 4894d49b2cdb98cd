/** The XML reader the tools use for services' XML answers (lib/tools/xml.ts). */
import { describe, expect, it } from 'vitest';
import { childElements, collapsedText, descendants, firstElement, MAX_XML_DEPTH, parseXml, textOf, XmlParseError } from '../../lib/tools/xml';

describe('parseXml', () => {
  it('keeps names as written, decodes entities and CDATA, and reads inline markup as text', async () => {
    const doc = await parseXml(`<?xml version="1.0"?>\n<!DOCTYPE Set PUBLIC "-//NLM//DTD x//EN" "x.dtd">\n<Set><Item Kind="a"><arxiv:doi>10.1/x</arxiv:doi><Title>5 &lt; 6 &amp; <i>in vivo</i>&#160;study</Title><Note><![CDATA[a <b> c]]></Note></Item><Item Kind="b"/></Set>`);
    const set = firstElement(doc, 'Set');
    expect(childElements(doc).map((e) => e.name)).toEqual(['Set']);
    expect(childElements(set, 'Item').map((e) => e.attributes.Kind)).toEqual(['a', 'b']);
    expect(textOf(firstElement(set, 'Item', 'Title'))).toBe('5 < 6 & in vivo\u00a0study');
    expect(textOf(firstElement(set, 'Item', 'Note'))).toBe('a <b> c');
    expect(textOf(firstElement(set, 'Item', 'arxiv:doi'))).toBe('10.1/x');
    expect(firstElement(set, 'Item', 'Missing', 'Deeper')).toBeUndefined();
  });

  it('finds descendants in document order and collapses hard-wrapped text', async () => {
    const doc = await parseXml('<a><b n="1"><b n="2"/></b><c><b n="3"/></c><t>  one\n   two  </t></a>');
    expect(descendants(doc, 'b').map((b) => b.attributes.n)).toEqual(['1', '2', '3']);
    expect(collapsedText(firstElement(doc, 'a', 't'))).toBe('one two');
    expect(collapsedText(undefined)).toBe('');
  });

  it('refuses nesting deeper than any service sends, rather than parse it', async () => {
    const deep = `${'<x>'.repeat(MAX_XML_DEPTH + 1)}${'</x>'.repeat(MAX_XML_DEPTH + 1)}`;
    await expect(parseXml(deep)).rejects.toThrow(XmlParseError);
    await expect(parseXml(`${'<x>'.repeat(MAX_XML_DEPTH)}${'</x>'.repeat(MAX_XML_DEPTH)}`)).resolves.toBeDefined();
  });
});
