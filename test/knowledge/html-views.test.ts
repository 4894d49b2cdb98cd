/** The Markdown and cleaned-HTML views of a page (the Crawler's `markdown` and `html`). */
import { describe, expect, it } from 'vitest';
import { DocumentParseError, MAX_HTML_DEPTH } from '../../lib/knowledge/parse';
import { cleanHtml, htmlToMarkdown } from '../../lib/knowledge/parse/html-views';

const PAGE = `<!doctype html><html><head><title>T</title><script>x()</script></head><body>
<nav><a href="/">Home</a></nav>
<h1>Getting   started</h1>
<p>Fish &amp; chips, see <a href="/docs?a=1&amp;b=2"> the docs </a> and <a href="javascript:alert(1)">this</a>.<br>second line</p>
<ul><li>one</li><li><p>two <b>bold</b></p><ol><li>a</li><li>b</li></ol></li></ul>
<blockquote><p>quoted</p></blockquote>
<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>
<pre><code>  indented
    more</code></pre>
<p>Use <code>npm ci</code> <img src="/a.png" alt="A diagram"></p>
<h2></h2><h2>Next</h2><p class="x" onclick="y()" style="a">end</p><!-- c --><form><input value=x><label>L</label></form>
</body></html>`;

describe('htmlToMarkdown', () => {
  it('keeps headings, absolute links, nested lists, quotes, tables, code and images; drops what a reader never sees', () => {
    expect(htmlToMarkdown(PAGE, { baseUrl: 'https://s.example/guide/' })).toBe(
      [
        '# Getting started',
        '',
        'Fish & chips, see [the docs](https://s.example/docs?a=1&b=2) and this.',
        'second line',
        '',
        '- one',
        '- two bold',
        '  1. a',
        '  2. b',
        '',
        '> quoted',
        '',
        'Name | Value',
        'a | 1',
        '',
        '```',
        '  indented',
        '    more',
        '```',
        '',
        'Use `npm ci` ![A diagram](https://s.example/a.png)',
        '',
        '## Next',
        '',
        'end',
        '',
        'L',
      ].join('\n'),
    );
  });

  it('without a base URL keeps only absolute links', () => {
    expect(htmlToMarkdown('<p><a href="/rel">here</a> <a href="https://x.example/">there</a></p>')).toBe('here [there](https://x.example/)');
  });
});

describe('cleanHtml', () => {
  it('keeps the elements and the attributes that carry content only', () => {
    expect(cleanHtml(PAGE, { baseUrl: 'https://s.example/guide/' })).toBe(
      [
        '<html><body>',
        '<h1>Getting   started</h1>',
        '<p>Fish &amp; chips, see <a href="https://s.example/docs?a=1&amp;b=2"> the docs </a> and <a>this</a>.<br>second line</p>',
        '<ul><li>one</li><li><p>two <b>bold</b></p><ol><li>a</li><li>b</li></ol></li></ul>',
        '<blockquote><p>quoted</p></blockquote>',
        '<table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>',
        '<pre><code>  indented',
        '    more</code></pre>',
        '<p>Use <code>npm ci</code> <img src="https://s.example/a.png" alt="A diagram"></p>',
        '<h2></h2><h2>Next</h2><p>end</p><form><label>L</label></form>',
        '</body></html>',
      ].join('\n'),
    );
  });

  it('escapes text and attributes again', () => {
    expect(cleanHtml('<p title="x">a &lt;b&gt; &amp; "c"</p><a href="https://e.example/?q=&quot;x&quot;">l</a>')).toBe('<p>a &lt;b&gt; &amp; "c"</p><a href="https://e.example/?q=%22x%22">l</a>');
  });

  it(`refuses nesting deeper than ${MAX_HTML_DEPTH}, as the text view does`, () => {
    const nested = `${'<div>'.repeat(MAX_HTML_DEPTH + 1)}deep`;
    expect(() => cleanHtml(nested)).toThrow(DocumentParseError);
    expect(() => htmlToMarkdown(nested)).toThrow(DocumentParseError);
  });
});
