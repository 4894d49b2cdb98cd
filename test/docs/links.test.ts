/**
 * The documentation holds together: README.md stays a guide (at most 12 KB), and every relative
 * link in README.md, BENCHMARKS.md and docs/*.md reaches a file that exists and, with a
 * `#anchor`, a heading of that file, by GitHub's anchor rule.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README_LIMIT_BYTES = 12_288;

/** Where the checker reads files: the repository, or a few documents in memory. */
interface DocTree {
  /** The text of a file, or undefined when there is none (a directory, a missing path). */
  read(path: string): string | undefined;
  exists(path: string): boolean;
}

interface Link {
  target: string;
  line: number;
}

/** Blanks fenced code blocks (keeping their lines, so line numbers hold) and inline code spans. */
function withoutCode(markdown: string): string {
  let fenced = false;
  return markdown
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length));
    })
    .join('\n');
}

/**
 * The anchors GitHub gives a document's headings: the heading's text (a link's text, not its
 * address) lower-cased, every character but letters, digits, `_`, `-` and spaces dropped, each
 * space a `-`; a repeated anchor gets `-1`, `-2`, ...
 *
 * @example headingAnchors('## Tools for Agents (`lib/tools`)') // Set { 'tools-for-agents-libtools' }
 */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = (heading[1] ?? '').replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
    let anchor = base;
    for (let n = 1; anchors.has(anchor); n++) anchor = `${base}-${n}`;
    anchors.add(anchor);
  }
  return anchors;
}

/** The inline links and images of a document, outside code. */
function markdownLinks(markdown: string): Link[] {
  const text = withoutCode(markdown);
  const links: Link[] = [];
  for (const match of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const line = text.slice(0, match.index).split('\n').length;
    links.push({ target: match[1] ?? '', line });
  }
  return links;
}

/** Every relative link of `file` whose file or heading does not exist, as `file:line: target: why`. */
function brokenLinks(file: string, tree: DocTree): string[] {
  const markdown = tree.read(file);
  if (markdown === undefined) return [`${file}: no such file`];
  const problems: string[] = [];
  for (const { target, line } of markdownLinks(markdown)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
    const hash = target.indexOf('#');
    const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
    const anchor = hash < 0 ? undefined : decodeURIComponent(target.slice(hash + 1));
    const resolved = pathPart === '' ? file : posix.normalize(posix.join(posix.dirname(file), pathPart));
    const where = `${file}:${line}: ${target}`;
    if (resolved.startsWith('../') || !tree.exists(resolved)) {
      problems.push(`${where}: ${resolved} does not exist`);
      continue;
    }
    if (anchor === undefined) continue;
    const targetText = resolved.endsWith('.md') ? tree.read(resolved) : undefined;
    if (targetText === undefined) problems.push(`${where}: ${resolved} is not a Markdown file with headings`);
    else if (!headingAnchors(targetText).has(anchor)) problems.push(`${where}: ${resolved} has no heading #${anchor}`);
  }
  return problems;
}

const repository: DocTree = {
  read: (path) => {
    const full = posix.join(ROOT, path);
    return existsSync(full) && statSync(full).isFile() ? readFileSync(full, 'utf8') : undefined;
  },
  exists: (path) => existsSync(posix.join(ROOT, path)),
};

function memory(files: Record<string, string>): DocTree {
  const dirs = new Set(Object.keys(files).flatMap((f) => f.split('/').slice(0, -1).map((_, i, parts) => parts.slice(0, i + 1).join('/'))));
  return { read: (path) => files[path], exists: (path) => path in files || dirs.has(path) };
}

const DOCUMENTS = ['README.md', 'BENCHMARKS.md', ...readdirSync(posix.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

describe('the documentation', () => {
  it(`keeps README.md a guide: at most ${README_LIMIT_BYTES} bytes`, () => {
    expect(statSync(posix.join(ROOT, 'README.md')).size).toBeLessThanOrEqual(README_LIMIT_BYTES);
  });

  it('has no relative link to a missing file or heading', () => {
    expect(DOCUMENTS.length).toBeGreaterThan(3);
    expect(DOCUMENTS.flatMap((file) => brokenLinks(file, repository))).toEqual([]);
  });

  it('links README.md to every page of docs/', () => {
    const linked = new Set(markdownLinks(readFileSync(posix.join(ROOT, 'README.md'), 'utf8')).map((l) => l.target.split('#')[0]));
    expect(DOCUMENTS.filter((f) => f.startsWith('docs/') && !linked.has(f))).toEqual([]);
  });
});

describe('the link checker', () => {
  it('names GitHub anchors: punctuation and code marks dropped, spaces hyphens, repeats numbered', () => {
    const anchors = headingAnchors(
      [
        '# Easel',
        '## Tools for Agents (`lib/tools`)',
        '## Workflows: what is supported',
        '### Options',
        '### Options',
        '## 7. Knowledge index (`bench/knowledge.ts`)',
        '## A [linked](x.md) heading',
        '```sh',
        '# a shell comment, no heading',
        '```',
      ].join('\n'),
    );
    expect([...anchors]).toEqual([
      'easel',
      'tools-for-agents-libtools',
      'workflows-what-is-supported',
      'options',
      'options-1',
      '7-knowledge-index-benchknowledgets',
      'a-linked-heading',
    ]);
  });

  it('reports a missing file, a missing heading and a link leaving the repository, and nothing in code', () => {
    const tree = memory({
      'README.md': [
        'See [the API](docs/api.md), [its errors](docs/api.md#errors) and [Options](#options).',
        'Broken: [gone](docs/gone.md), [no such heading](docs/api.md#routes), [up](../outside.md),',
        'and [a link over',
        'two lines](docs/api.md#nowhere). ![picture](docs/shot.png) [web](https://example.com/x#y)',
        '`[in code](missing.md)`',
        '```md',
        '[in a fence](missing.md)',
        '```',
        '## Options',
      ].join('\n'),
      'docs/api.md': '# The API\n\n## Errors\n\nBack to [the guide](../README.md#options) and [a folder](.).',
      'docs/shot.png': 'PNG',
    });
    expect(brokenLinks('docs/api.md', tree)).toEqual([]);
    expect(brokenLinks('README.md', tree)).toEqual([
      'README.md:2: docs/gone.md: docs/gone.md does not exist',
      'README.md:2: docs/api.md#routes: docs/api.md has no heading #routes',
      'README.md:2: ../outside.md: ../outside.md does not exist',
      'README.md:3: docs/api.md#nowhere: docs/api.md has no heading #nowhere',
    ]);
  });
});
