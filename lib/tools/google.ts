/**
 * Google web search through SerpApi as an Agent's tool, as RAGFlow offers it
 * (agent/tools/google.py): the kind `Google` is the function `google_search`; the model writes
 * `q` and may write `start` (the offset) and `num` (how many results); the entry's params give
 * `country` (`gl`), `language` (`hl`) and the defaults of `start` (0) and `num` (6).
 *
 * Calls go to SerpApi's Google Search API, `GET {base}/search.json?engine=google&q=...&gl=...
 * &hl=...&google_domain=google.com&start=...&num=...&api_key=<key>` (https://serpapi.com/search-api),
 * the base being the operator's (EASEL_TOOL_GOOGLE_BASE_URL). The key travels in the query
 * string, so no message here ever repeats the URL: failures name the service only.
 *
 * The key is a tenant secret: `api_key: "{secret.NAME}"` names it, an empty `api_key` (as stock
 * templates ship) means the secret `SERPAPI_API_KEY`, and a literal key is refused at load.
 *
 * Results become knowledge blocks the model cites and the pass's references (title, link, the
 * source's description or else the snippet, as RAGFlow reads them); `data` is SerpApi's
 * `organic_results`, RAGFlow's `json` output.
 *
 * @example
 *   const tools = createToolRegistry([googleTool({ baseUrl: 'https://serpapi.com' })]);
 */
import { z } from 'zod';
import type { OutboundResponse } from '../outbound/request';
import { ToolError } from './errors';
import { credentialParam, functionShape, integerParam, parseServiceAnswer, parseToolArgs, resolveCredential, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import type { Tool, ToolResult } from './types';
import { webSearchResult } from './web-results';
import { requestService, type ServiceEndpoint, serviceEndpoint, serviceJson, type ServiceVerdict } from './web-service';

export const GOOGLE_BASE_URL = 'https://serpapi.com';
/** The tenant secret that holds the SerpApi key when an entry's `api_key` is empty. */
export const GOOGLE_KEY_SECRET = 'SERPAPI_API_KEY';
export const GOOGLE_FUNCTION = 'google_search';
/** RAGFlow's limit on a search (COMPONENT_EXEC_TIMEOUT, 12 s). */
export const GOOGLE_TIMEOUT_MS = 12_000;
/** What the model reads when a search finds nothing. */
export const GOOGLE_NOTHING_FOUND = 'Google found no web results for this query.';
/** SerpApi's largest page. */
const MAX_NUM = 100;

export const GOOGLE_DESCRIPTION =
  "Search the world's information, including webpages, images, videos and more. Google has many special features to help you find exactly what you're looking ...";

const PARAMETERS = {
  type: 'object',
  properties: {
    q: {
      type: 'string',
      description: 'The search keywords to execute with Google. The keywords should be the most important words/terms(includes synonyms) from the original request.',
    },
    start: {
      type: 'integer',
      description:
        "Parameter defines the result offset. It skips the given number of results. It's used for pagination. (e.g., 0 (default) is the first page of results, 10 is the 2nd page of results, 20 is the 3rd page of results, etc.). Google Local Results only accepts multiples of 20(e.g. 20 for the second page results, 40 for the third page results, etc.) as the `start` value.",
    },
    num: {
      type: 'integer',
      description:
        'Parameter defines the maximum number of results to return. (e.g., 10 (default) returns 10 results, 40 returns 40 results, and 100 returns 100 results). The use of num may introduce latency, and/or prevent the inclusion of specialized result types. It is better to omit this parameter unless it is strictly necessary to increase the number of results per page. Results are not guaranteed to have the number of results specified in num.',
    },
  },
  required: ['q'],
};

/** The `gl` values RAGFlow accepts (Google's country codes). */
export const GOOGLE_COUNTRIES = (
  'af al dz as ad ao ai aq ag ar am aw au at az bs bh bd bb by be bz bj bm bt bo ba bw bv br io bn bg bf bi kh cm ca cv ky cf td cl cn cx cc co km cg cd ck cr ci hr cu cy cz dk dj dm do ' +
  'ec eg sv gq er ee et fk fo fj fi fr gf pf tf ga gm ge de gh gi gr gl gd gp gu gt gn gw gy ht hm va hn hk hu is in id ir iq ie il it jm jp jo kz ke ki kp kr kw kg la lv lb ls lr ly li lt lu ' +
  'mo mk mg mw my mv ml mt mh mq mr mu yt mx fm md mc mn ms ma mz mm na nr np nl an nc nz ni ne ng nu nf mp no om pk pw ps pa pg py pe ph pn pl pt pr qa re ro ru rw sh kn lc pm vc ws sm st ' +
  'sa sn rs sc sl sg sk si sb so za gs es lk sd sr sj sz se ch sy tw tj tz th tl tg tk to tt tn tr tm tc tv ug ua ae uk gb us um uy uz vu ve vn vg vi wf eh ye zm zw'
).split(' ');

/** The `hl` values RAGFlow accepts (Google's interface languages). */
export const GOOGLE_LANGUAGES = (
  'af ak sq ws am ar hy az eu be bem bn bh xx-bork bs br bg bt km ca chr ny zh-cn zh-tw co hr cs da nl xx-elmer en eo et ee fo tl fi fr fy gaa gl ka de el kl gn gu xx-hacker ht ha haw ' +
  'iw hi hu is ig id ia ga it ja jw kn kk rw rn xx-klingon kg ko kri ku ckb ky lo la lv ln lt loz lg ach mk mg ms ml mt mv mi mr mfe mo mn sr-me my ne pcm nso no nn oc or om ps fa ' +
  'xx-pirate pl pt pt-br pt-pt pa qu ro rm nyn ru gd sr sh st tn crs sn sd si sk sl so es es-419 su sw sv tg ta tt te th ti to lua tum tr tk tw ug uk ur uz vu vi cy wo xh yi yo zu'
).split(' ');

const code = (codes: readonly string[], message: string) => z.string().refine((v) => codes.includes(v), { message });

const startParam = () => integerParam(0, 'Google start should be 0 or a positive integer');
const numParam = () => integerParam(1, `Google num should be within [1, ${MAX_NUM}]`).pipe(z.number().max(MAX_NUM, `Google num should be within [1, ${MAX_NUM}]`));

const googleParams = z.lazy(() => z.looseObject({
  api_key: credentialParam('api_key', GOOGLE_KEY_SECRET),
  country: withDefault(code(GOOGLE_COUNTRIES, 'Google Country is not supported: it should be one of Google’s country codes (us, gb, de, cn, ...)'), 'cn'),
  language: withDefault(code(GOOGLE_LANGUAGES, 'Google languages is not supported: it should be one of Google’s language codes (en, de, zh-cn, ...)'), 'en'),
  start: withDefault(startParam(), 0),
  num: withDefault(numParam(), 6),
  ...functionShape(),
}));
export type GoogleParams = z.output<typeof googleParams>;

/** What the model may write; anything else is ignored. */
const googleArgs = z.lazy(() => z.object({
  q: z.string().trim().min(1, 'must be a non-empty string'),
  start: startParam().nullish(),
  num: numParam().nullish(),
}));

const organicResult = z.lazy(() => z.looseObject({
  title: z.string().nullish(),
  link: z.string().nullish(),
  snippet: z.string().nullish(),
  about_this_result: z.looseObject({ source: z.looseObject({ description: z.string().nullish() }).nullish() }).nullish(),
}));
const googleAnswer = z.lazy(() => z.looseObject({
  organic_results: z.array(organicResult).nullish(),
  error: z.string().nullish(),
  search_metadata: z.looseObject({ status: z.string().nullish() }).nullish(),
}));

export interface GoogleOptions {
  /** The operator's SerpApi endpoint. @default GOOGLE_BASE_URL */
  baseUrl?: string;
}

/** The kind `Google`, talking to SerpApi at `baseUrl`. */
export function googleTool(options: GoogleOptions = {}): ToolKind<GoogleParams> {
  const endpoint = serviceEndpoint(options.baseUrl ?? GOOGLE_BASE_URL);
  return {
    name: 'Google',
    params: googleParams,
    credentials: [{ param: 'api_key', secret: GOOGLE_KEY_SECRET }],
    create: (entry) => searchTool(entry, endpoint),
  };
}

function searchTool(entry: ToolEntry<GoogleParams>, endpoint: ServiceEndpoint): Tool {
  const p = entry.params;
  const name = p.function_name || GOOGLE_FUNCTION;
  return {
    name,
    description: p.description || GOOGLE_DESCRIPTION,
    parameters: PARAMETERS,
    timeoutMs: GOOGLE_TIMEOUT_MS,
    async invoke(args, ctx): Promise<ToolResult> {
      const a = parseToolArgs(name, googleArgs, args);
      const key = (await resolveCredential(name, 'Google (SerpApi)', { name: 'api_key', value: p.api_key, defaultSecret: GOOGLE_KEY_SECRET }, ctx)) as string;
      const num = a.num ?? p.num;
      const query = new URLSearchParams({
        engine: 'google',
        q: a.q,
        google_domain: 'google.com',
        gl: p.country,
        hl: p.language,
        start: String(a.start ?? p.start),
        num: String(num),
        api_key: key,
      });
      const res = await requestService(name, ctx, { url: `${endpoint.prefix}/search.json?${query}`, guard: endpoint.guard, timeoutMs: GOOGLE_TIMEOUT_MS }, { classify: serpApiVerdict });
      const answer = parseServiceAnswer(name, 'SerpApi', googleAnswer, serviceJson(name, 'SerpApi', res));
      if (!answer.organic_results) {
        // SerpApi reports a search without results as a success with an `error` line; anything else is a failure
        if (answer.error && answer.search_metadata?.status !== 'Success') throw new ToolError(`tool "${name}": SerpApi answered: ${answer.error.slice(0, 200)}`);
        return { kind: 'result', content: GOOGLE_NOTHING_FOUND, data: [] };
      }
      // Google may answer more than `num`; the model asked for at most that many
      const organic = answer.organic_results.slice(0, num);
      const results = organic.map((r) => ({ title: r.title, url: r.link, content: r.about_this_result?.source?.description ?? r.snippet }));
      return webSearchResult(results, { nothingFound: GOOGLE_NOTHING_FOUND, data: organic });
    },
  };
}

/** SerpApi's 429 means either "too fast" (worth a retry) or "the plan has no searches left" (not). */
function serpApiVerdict(res: OutboundResponse): ServiceVerdict | undefined {
  if (res.status === 429 && /run out|no .*searches left/i.test(res.body)) return { kind: 'final' };
  return undefined;
}
