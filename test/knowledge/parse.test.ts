import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { describe, expect, it } from 'vitest';
import {
  DocumentParseError,
  MAX_PARSED_BYTES,
  MAX_DOCUMENT_CHARS,
  MAX_HTML_DEPTH,
  MAX_PDF_PAGES,
  SUPPORTED_EXTENSIONS,
  documentKind,
  htmlToText,
  parseDocument,
} from '../../lib/knowledge/parse';
import { countTokens } from '../../lib/knowledge/tokens';
import { png } from '../helpers/png';

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);
const fixture = (name: string): Uint8Array => new Uint8Array(readFileSync(new URL(`../fixtures/knowledge/${name}`, import.meta.url)));

async function rejection(promise: Promise<unknown>): Promise<DocumentParseError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(DocumentParseError);
  return error as DocumentParseError;
}

/** A PDF made by pdf-lib: one page per entry, each line drawn as its own text line. */
async function makePdf(pages: (string[] | 'image' | 'blank')[]): Promise<Uint8Array> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  for (const content of pages) {
    const page = pdf.addPage([400, 600]);
    if (content === 'blank') continue;
    if (content === 'image') {
      const image = await pdf.embedPng(png(32, 32, 3));
      page.drawImage(image, { x: 50, y: 300, width: 200, height: 200 });
      continue;
    }
    content.forEach((line, i) => page.drawText(line, { x: 40, y: 550 - i * 16, size: 12, font }));
  }
  return pdf.save();
}

/**
 * A PDF written by hand: one page whose text uses a predefined CMap (UniGB-UCS2-H) and a CJK
 * font that is not embedded, as many Chinese documents are made. pdf-lib cannot write one.
 */
function cjkPdf(text: string): Uint8Array {
  const hex = [...text].map((char) => char.codePointAt(0)!.toString(16).padStart(4, '0')).join('');
  const content = `BT /F1 24 Tf 72 700 Td <${hex}> Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>',
    '<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /UniGB-UCS2-H /DescendantFonts [6 0 R] >>',
    `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
    '<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light /CIDSystemInfo << /Registry (Adobe) /Ordering (GB1) /Supplement 2 >> /FontDescriptor 7 0 R >>',
    '<< /Type /FontDescriptor /FontName /STSong-Light /Flags 6 /FontBBox [0 -200 1000 900] /ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 880 /StemV 80 >>',
  ];
  let pdf = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(pdf.length);
    pdf += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = pdf.length;
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((offset) => `${String(offset).padStart(10, '0')} 00000 n \n`).join('')}`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return utf8(pdf);
}

describe('documentKind', () => {
  it.each([
    ['notes.txt', 'text/plain', 'text'],
    ['REPORT.PDF', 'application/octet-stream', 'pdf'],
    ['guide.md', '', 'markdown'],
    ['guide.markdown', 'text/plain', 'markdown'],
    ['page.htm', 'text/plain', 'html'],
    ['page.html', 'application/octet-stream', 'html'],
    ['data.csv', 'text/csv', 'text'],
    ['events.jsonl', 'application/octet-stream', 'text'],
    ['server.log', '', 'text'],
    ['main.py', 'text/x-python', 'text'],
    ['dir/sub.d/readme', 'text/markdown; charset=utf-8', 'markdown'],
    ['download', 'application/pdf', 'pdf'],
    ['index', 'TEXT/HTML; charset=UTF-8', 'html'],
  ])('%s sent as "%s" is %s', (name, mime, kind) => {
    expect(documentKind(name, mime)).toBe(kind);
  });

  it.each([
    ['slides.pptx', 'text/plain'],
    ['photo.png', 'image/png'],
    ['archive', 'application/zip'],
    ['blob', 'application/octet-stream'],
    ['.bashrc', ''],
  ])('%s sent as "%s" is unsupported', (name, mime) => {
    expect(documentKind(name, mime)).toBeUndefined();
  });

  it('lists each supported extension once, each with a kind', () => {
    expect(new Set(SUPPORTED_EXTENSIONS).size).toBe(SUPPORTED_EXTENSIONS.length);
    expect(SUPPORTED_EXTENSIONS.slice(0, 3)).toEqual(['.txt', '.md', '.markdown']);
    for (const extension of SUPPORTED_EXTENSIONS) expect(documentKind(`file${extension}`, ''), extension).toBeDefined();
  });
});

describe('parseDocument: text', () => {
  it('reads UTF-8 as one section, the byte-order mark dropped and line ends normalized', async () => {
    const doc = await parseDocument(utf8('\uFEFFfirst line\r\nsecond — ünïcode 数据\rthird\n'), 'text');
    expect(doc).toEqual({ sections: [{ text: 'first line\nsecond — ünïcode 数据\nthird\n' }] });
  });

  it('reads UTF-16 announced by a byte-order mark', async () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('héllo\nworld', 'utf16le')]);
    expect(await parseDocument(new Uint8Array(le), 'text')).toEqual({ sections: [{ text: 'héllo\nworld' }] });
  });

  it('refuses bytes that are not UTF-8', async () => {
    const latin1 = Uint8Array.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x6e, 0x6f, 0x69, 0x72]); // "café noir" in Latin-1
    expect((await rejection(parseDocument(latin1, 'text'))).message).toBe('the file is not UTF-8 text; save it as UTF-8 and upload it again');
  });

  it('refuses binary content', async () => {
    const binary = Uint8Array.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0x00, 0x08, 0x00, 0xff, 0xd8]);
    expect((await rejection(parseDocument(binary, 'text'))).message).toBe('the file is binary, not text');
    // Valid UTF-8 with NUL bytes is binary too.
    expect((await rejection(parseDocument(utf8('abc\u0000\u0000def'), 'text'))).message).toBe('the file is binary, not text');
  });

  it('refuses a file with no text', async () => {
    expect((await rejection(parseDocument(utf8(' \n\t\n'), 'text'))).message).toBe('the document has no text');
    expect((await rejection(parseDocument(new Uint8Array(), 'text'))).message).toBe('the document has no text');
  });

  it('refuses files and texts over the limits', async () => {
    const huge = new Uint8Array(MAX_PARSED_BYTES + 1).fill(0x61);
    expect((await rejection(parseDocument(huge, 'text'))).message).toBe('the file is 64.0 MiB; at most 64.0 MiB are parsed');
    const long = utf8('a'.repeat(MAX_DOCUMENT_CHARS + 1));
    expect((await rejection(parseDocument(long, 'text'))).message).toBe('the document has more than 5,000,000 characters of text');
    const fits = await parseDocument(utf8('a'.repeat(MAX_DOCUMENT_CHARS)), 'text');
    expect(fits.sections[0]!.text).toHaveLength(MAX_DOCUMENT_CHARS);
  });

  it('loads the tokenizer, so counting works after parsing', async () => {
    await parseDocument(utf8('x'), 'text');
    expect(countTokens('hello world')).toBe(2);
  });

  it('rejects with the reason of an aborted signal', async () => {
    const controller = new AbortController();
    controller.abort(new Error('stopped'));
    await expect(parseDocument(utf8('x'), 'text', { signal: controller.signal })).rejects.toThrow('stopped');
  });
});

describe('parseDocument: markdown', () => {
  const source = [
    '---',
    'title: Front matter is metadata',
    '---',
    'Intro paragraph with **bold**, _italic_, `inline code` and a [link](https://example.com/docs).',
    '',
    '# Install',
    '',
    'Run the installer:',
    '',
    '```sh',
    '# a comment, not a heading',
    'npm install easel',
    '```',
    '',
    '- first item',
    '- [x] done item',
    '1. numbered',
    '',
    '> quoted line',
    '',
    '![diagram of the flow](img/flow.png)',
    '<!-- a hidden note -->',
    '',
    'Usage',
    '-----',
    '',
    '| name | value |',
    '| ---- | ----- |',
    '| a    | 1     |',
    '',
    '## Notes ##',
    'Escaped \\*stars\\* stay.',
    '***',
  ].join('\n');

  it('splits at headings, keeping the text readable', async () => {
    const doc = await parseDocument(utf8(source), 'markdown');
    expect(doc.sections.map((section) => section.text)).toEqual([
      'Intro paragraph with bold, italic, inline code and a link (https://example.com/docs).',
      [
        'Install',
        '',
        'Run the installer:',
        '',
        '# a comment, not a heading',
        'npm install easel',
        '',
        '- first item',
        '- done item',
        '1. numbered',
        '',
        'quoted line',
        '',
        'diagram of the flow',
      ].join('\n'),
      ['Usage', '', '| name | value |', '', '| a    | 1     |'].join('\n'),
      'Notes\nEscaped *stars* stay.',
    ]);
    expect(doc.sections.every((section) => section.page === undefined)).toBe(true);
  });

  it('keeps an unclosed code fence as text to the end', async () => {
    const doc = await parseDocument(utf8('# Code\n```\n# inside\nstill code'), 'markdown');
    expect(doc.sections).toEqual([{ text: 'Code\n# inside\nstill code' }]);
  });

  it('refuses Markdown that is not UTF-8', async () => {
    expect((await rejection(parseDocument(Uint8Array.from([0x23, 0x20, 0xe9, 0xe8]), 'markdown'))).message).toMatch(/not UTF-8/);
  });
});

describe('parseDocument: html', () => {
  const page = `<!doctype html>
<html><head>
  <meta charset="utf-8"><title> Easel &mdash; Guide </title>
  <style>body { color: red }</style><script>alert("x")</script>
</head><body>
  <nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>
  <div role="navigation">Breadcrumbs</div>
  <header><p>Site tagline</p></header>
  <h1>Getting   started</h1>
  <p>Fish &amp; chips &lt;3 caf&eacute; &#x1F600;<br>second line</p>
  <ul><li>one</li><li>two <b>bold</b></li></ul>
  <table><tr><th>Name</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>
  <pre>  indented
    more</pre>
  <p hidden>secret</p><span aria-hidden="true">icon</span>
  <noscript>enable js</noscript><template><p>tpl</p></template>
  <form><label>Name</label><input value="x"><select><option>opt</option></select><button>Send</button><textarea>typed</textarea></form>
  <img src="a.png" alt="A diagram">
  <h2>Next</h2><p>Inline <i>run</i>s stay joined</p>
  <svg><title>svg title</title><text>drawn</text></svg>
</body></html>`;

  it('keeps the title and the readable text; drops scripts, styles, navigation and hidden parts', async () => {
    const doc = await parseDocument(utf8(page), 'html');
    expect(doc.sections.map((section) => section.text)).toEqual([
      'Easel — Guide\nSite tagline',
      ['Getting started', 'Fish & chips <3 café 😀', 'second line', '- one', '- two bold', 'Name | Value', 'a | 1', '  indented', '    more', 'Name', 'A diagram'].join('\n'),
      'Next\nInline runs stay joined',
    ]);
  });

  it('htmlToText gives the same text in one string', () => {
    const text = htmlToText(page);
    expect(text.startsWith('Easel — Guide\nSite tagline\n\nGetting started\n')).toBe(true);
    expect(text).not.toMatch(/alert|color: red|Home|Breadcrumbs|secret|icon|enable js|tpl|opt|Send|typed|svg title|drawn/);
  });

  it('survives broken markup', () => {
    expect(htmlToText('<div><p>unclosed <b>bold<div>next</p></span>tail')).toBe('unclosed bold\nnext\ntail');
    expect(htmlToText('<script>never closed')).toBe('');
    expect(htmlToText('plain text, no tags')).toBe('plain text, no tags');
  });

  it('decodes the charset its meta declares', async () => {
    const latin = Buffer.concat([Buffer.from('<meta charset="windows-1252"><p>caf'), Buffer.from([0xe9]), Buffer.from('</p>')]);
    expect(await parseDocument(new Uint8Array(latin), 'html')).toEqual({ sections: [{ text: 'café' }] });
    const japanese = Buffer.concat([Buffer.from('<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"><p>'), Buffer.from([0x93, 0xfa, 0x96, 0x7b])]);
    expect(await parseDocument(new Uint8Array(japanese), 'html')).toEqual({ sections: [{ text: '日本' }] });
  });

  it(`reads nesting up to ${MAX_HTML_DEPTH} deep and refuses deeper`, () => {
    const nested = (depth: number, tag = 'div'): string => `${`<${tag}>`.repeat(depth)}deep${`</${tag}>`.repeat(depth)}`;
    expect(htmlToText(nested(MAX_HTML_DEPTH))).toBe('deep');
    expect(() => htmlToText(nested(MAX_HTML_DEPTH + 1))).toThrow(new DocumentParseError(`the HTML nests elements more than ${MAX_HTML_DEPTH} deep`));
    // Unclosed inline elements nest too.
    expect(() => htmlToText('<b>x'.repeat(100_000))).toThrow(DocumentParseError);
  });

  it('refuses binary content and pages without text', async () => {
    expect((await rejection(parseDocument(Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0]), 'html'))).message).toBe('the file is binary, not HTML');
    expect((await rejection(parseDocument(utf8('<html><head><script>x</script></head><body> </body></html>'), 'html'))).message).toBe(
      'the document has no text',
    );
  });
});

describe('parseDocument: pdf', () => {
  it('reads one section per page, numbered from 1, skipping pages without text', async () => {
    const bytes = await makePdf([['Chapter one.', 'The first page has two lines.'], 'blank', ['Chapter three: café, naïve'], ['Last page']]);
    const doc = await parseDocument(bytes, 'pdf');
    expect(doc.sections.map((section) => section.page)).toEqual([1, 3, 4]);
    expect(doc.sections[0]!.text).toBe('Chapter one.\nThe first page has two lines.');
    expect(doc.sections[2]!.text).toBe('Last page');
  });

  it('reads text whose font uses a predefined CJK CMap', async () => {
    expect((await parseDocument(cjkPdf('数据知识库'), 'pdf')).sections).toEqual([{ text: '数据知识库', page: 1 }]);
  });

  it('does not detach the caller’s bytes', async () => {
    const bytes = await makePdf([['Hello PDF']]);
    const before = bytes.byteLength;
    await parseDocument(bytes, 'pdf');
    expect(bytes.byteLength).toBe(before);
    expect((await parseDocument(bytes, 'pdf')).sections).toEqual([{ text: 'Hello PDF', page: 1 }]);
  });

  it('refuses a PDF without a text layer', async () => {
    const scanned = await makePdf(['image', 'image']);
    expect((await rejection(parseDocument(scanned, 'pdf'))).message).toBe('the PDF has no text layer; scanned documents are not supported');
  });

  it('refuses a PDF that needs a password, and reads one that only restricts permissions', async () => {
    expect((await rejection(parseDocument(fixture('encrypted-password.pdf'), 'pdf'))).message).toBe(
      'the PDF is encrypted with a password; upload an unprotected copy',
    );
    const doc = await parseDocument(fixture('encrypted-owner-only.pdf'), 'pdf');
    expect(doc.sections).toEqual([{ text: 'Confidential quarterly figures.', page: 1 }]);
  });

  it('refuses damaged and non-PDF files', async () => {
    const good = await makePdf([['Some text']]);
    const truncated = good.slice(0, 400);
    expect((await rejection(parseDocument(truncated, 'pdf'))).message).toMatch(/^the (file is not a valid PDF|PDF could not be (opened|read)); it may be damaged$/);
    const garbage = utf8('%PDF-1.7\nthis is not a pdf body at all\n%%EOF');
    expect((await rejection(parseDocument(garbage, 'pdf'))).message).toMatch(/it may be damaged$/);
    expect((await rejection(parseDocument(utf8('just text'), 'pdf'))).message).toBe('the file is not a PDF');
  });

  it(`refuses a PDF of more than ${MAX_PDF_PAGES} pages`, async () => {
    const pdf = await PDFDocument.create();
    for (let i = 0; i <= MAX_PDF_PAGES; i++) pdf.addPage([10, 10]);
    const bytes = await pdf.save();
    expect((await rejection(parseDocument(bytes, 'pdf'))).message).toBe(`the PDF has ${MAX_PDF_PAGES + 1} pages; at most ${MAX_PDF_PAGES} are parsed`);
  });

  it('stops when the signal aborts, before or while it reads', async () => {
    const bytes = await makePdf([['one'], ['two']]);
    const before = new AbortController();
    before.abort(new Error('parse stopped'));
    await expect(parseDocument(bytes, 'pdf', { signal: before.signal })).rejects.toThrow('parse stopped');
    const during = new AbortController();
    const parsing = parseDocument(bytes, 'pdf', { signal: during.signal });
    during.abort(new Error('stopped while reading'));
    await expect(parsing).rejects.toThrow('stopped while reading');
    // The next parse is not disturbed.
    expect((await parseDocument(bytes, 'pdf')).sections).toHaveLength(2);
  });
});

describe('parseDocument: pdf in a bundle', () => {
  // A Lambda bundle carries PDF.js but not its optional native canvas package, nor its CMaps:
  // parsing must still work there (PDF.js needs a DOMMatrix as it loads; see withMatrixStandIn),
  // and CJK text once the CMaps' folder is named.
  it('reads PDFs from an esbuild bundle with no node_modules beside it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'easel-pdf-bundle-'));
    try {
      const root = join(import.meta.dirname, '../..');
      await build({
        stdin: {
          // Reads each PDF named; a folder named instead becomes the PDF resources' folder.
          contents: `import { readFileSync, statSync } from 'node:fs';
            import { parseDocument, setPdfResourceDirectory } from './lib/knowledge/parse';
            const results = [];
            for (const path of process.argv.slice(2)) {
              if (statSync(path).isDirectory()) { setPdfResourceDirectory(path); continue; }
              results.push(await parseDocument(new Uint8Array(readFileSync(path)), 'pdf').catch((error) => ({ error: error.message })));
            }
            process.stdout.write(JSON.stringify({ results, matrix: String(globalThis.DOMMatrix) }) + '\\n');`,
          resolveDir: root,
          loader: 'ts',
        },
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        outfile: join(dir, 'bundle.mjs'),
        banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
        logLevel: 'silent',
      });
      await writeFile(join(dir, 'pages.pdf'), await makePdf([['Bundled page one'], ['Bundled page two']]));
      await writeFile(join(dir, 'cjk.pdf'), cjkPdf('数据'));
      const args = [join(dir, 'bundle.mjs'), join(dir, 'pages.pdf'), join(dir, 'cjk.pdf'), join(root, 'node_modules/pdfjs-dist'), join(dir, 'cjk.pdf')];
      const { stdout } = await promisify(execFile)(process.execPath, args, { cwd: dir, timeout: 60_000 });
      // PDF.js logs to stdout, once, that it cannot render: the answer is the last line.
      const { results, matrix } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { results: unknown[]; matrix: string };
      expect(results).toEqual([
        { sections: [{ text: 'Bundled page one', page: 1 }, { text: 'Bundled page two', page: 2 }] },
        { error: 'the PDF has no text layer; scanned documents are not supported' },
        { sections: [{ text: '数据', page: 1 }] },
      ]);
      // The stand-in is gone once PDF.js has loaded.
      expect(matrix).toBe('undefined');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
