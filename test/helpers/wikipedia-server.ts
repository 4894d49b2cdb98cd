/**
 * A local stand-in for the MediaWiki Action API of Wikipedia's wikis, one per language:
 * `GET /w/api.php` serves the English wiki, `GET /<language>/w/api.php` the one of that
 * language (for a base with the `{language}` placeholder in its path).
 *
 * - `action=query&list=search&srsearch=<q>&srlimit=<n>` answers
 *   `{batchcomplete, continue?, query: {searchinfo: {totalhits}, search: [{ns, title, pageid}]}}`
 *   (with `srprop=`, no snippets), the pages whose title or text shares a word with `q`;
 * - `action=query&prop=extracts|info|pageprops&pageids=<id|id>` answers
 *   `{batchcomplete, query: {pages: [{pageid, ns, title, extract, fullurl, pageprops?}]}}`, the pages
 *   by id; an id the wiki does not have is `{pageid, missing: true}`. `exintro` gives the text
 *   before the first section, `explaintext` plain text instead of HTML; with `exintro`, at most
 *   20 extracts come in one answer (the rest without one, and a `continue`), without it one.
 * - `formatversion=2` gives pages as a list, otherwise keyed by id (version 1); a search without
 *   `srsearch`, more than 50 ids, or an unknown `action` is MediaWiki's HTTP 200
 *   `{error: {code, info}}`; a request without a User-Agent that says who it is, a 403 as
 *   Wikimedia's edge sends it.
 */
import { matches, type RecordedRequest, type ScriptedServer, ScriptedServer as Server, type ServiceAnswer, ServiceStandIn } from './scripted-server';

export interface WikiPage {
  pageid: number;
  title: string;
  /** The text before the first section. */
  intro: string;
  /** The sections after it. @default '' */
  body?: string;
  disambiguation?: boolean;
}

export const WIKIPEDIA_ARTICLE_ORIGIN = (language: string) => `https://${language}.wikipedia.org`;

export class WikipediaServer extends ServiceStandIn {
  private constructor(
    server: ScriptedServer,
    readonly wikis: Record<string, WikiPage[]>,
  ) {
    super(server);
  }

  static async start(wikis: Record<string, WikiPage[]>): Promise<WikipediaServer> {
    let self: WikipediaServer | undefined;
    const server = await Server.start((request) => self!.answer(request));
    self = new WikipediaServer(server, wikis);
    return self;
  }

  private answer(request: RecordedRequest): ServiceAnswer {
    const userAgent = String(request.headers['user-agent'] ?? '');
    if (!/[A-Za-z].*[ (/]/.test(userAgent)) {
      return { status: 403, headers: { 'content-type': 'text/plain' }, body: 'Please set a user-agent and respect our robot policy https://w.wiki/4wJS.' };
    }
    const route = /^(?:\/([a-z-]+))?\/w\/api\.php$/.exec(request.path);
    const language = route?.[1] ?? 'en';
    const pages = route ? this.wikis[language] : undefined;
    if (!pages) return { status: 404, headers: { 'content-type': 'text/html' }, body: '<html><body>Not Found</body></html>' };
    const q = request.query;
    const v2 = q.formatversion === '2';
    if (q.action !== 'query') return apiError('badvalue', `Unrecognized value for parameter "action": ${q.action ?? ''}.`);
    if (q.list === 'search') {
      if (!q.srsearch) return apiError('missingparam', 'The "srsearch" parameter must be set.');
      const limit = Math.min(Number(q.srlimit ?? 10), 500);
      const hits = pages.filter((p) => matches(q.srsearch!, `${p.title} ${p.intro} ${p.body ?? ''}`));
      const search = hits.slice(0, limit).map((p) => ({ ns: 0, title: p.title, pageid: p.pageid }));
      return json({
        batchcomplete: v2 ? true : '',
        ...(hits.length > limit ? { continue: { sroffset: limit, continue: '-||' } } : {}),
        query: { searchinfo: { totalhits: hits.length }, search },
      });
    }
    if (q.prop !== undefined) {
      const ids = (q.pageids ?? '').split('|').filter(Boolean).map(Number);
      if (ids.length > 50) return apiError('toomanyvalues', 'Too many values supplied for parameter "pageids". The limit is 50.');
      const props = new Set(q.prop.split('|'));
      const intro = q.exintro !== undefined;
      const withExtract = intro ? 20 : 1;
      const found = [...ids].sort((a, b) => a - b).map((id, i) => {
        const page = pages.find((p) => p.pageid === id);
        if (!page) return { pageid: id, missing: true };
        const text = intro ? page.intro : `${page.intro}\n\n${page.body ?? ''}`.trim();
        const extract = q.explaintext !== undefined ? text : text.split(/\n+/).map((line) => `<p>${line}</p>`).join('');
        return {
          pageid: page.pageid,
          ns: 0,
          title: page.title,
          ...(props.has('extracts') && i < withExtract ? { extract } : {}),
          ...(props.has('info') ? { contentmodel: 'wikitext', pagelanguage: language, ...(q.inprop === 'url' ? urls(language, page.title) : {}) } : {}),
          ...(props.has('pageprops') && page.disambiguation ? { pageprops: { disambiguation: '' } } : {}),
        };
      });
      return json({
        batchcomplete: v2 ? true : '',
        ...(found.length > withExtract && props.has('extracts') ? { continue: { excontinue: withExtract, continue: '||info|pageprops' } } : {}),
        query: { pages: v2 ? found : Object.fromEntries(found.map((p) => [String(p.pageid), p])) },
      });
    }
    return json({ batchcomplete: v2 ? true : '' });
  }
}

function urls(language: string, title: string) {
  const url = `${WIKIPEDIA_ARTICLE_ORIGIN(language)}/wiki/${encodeURIComponent(title.replace(/ /g, '_'))}`;
  return { fullurl: url, canonicalurl: url, editurl: `${WIKIPEDIA_ARTICLE_ORIGIN(language)}/w/index.php?title=${encodeURIComponent(title)}&action=edit` };
}

function json(body: unknown): ServiceAnswer {
  return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(body) };
}

function apiError(code: string, info: string): ServiceAnswer {
  return json({ error: { code, info, docref: 'See https://en.wikipedia.org/w/api.php for API usage.' }, servedby: 'mw-api-ext.eqiad.main' });
}
