/**
 * RAGFlow's tools (agent/tools/*.py) Easel does not implement, and why: a DSL that uses one,
 * as an Agent's tool or on the canvas, is refused at load with its name and the reason. An
 * import may instead drop such tool entries from its Agents (`drop_unsupported_tools`), and
 * says which it dropped (lib/tools/drop-unsupported.ts).
 */

const LATER = 'it runs code or SQL the tenant supplies, which needs a sandbox Easel does not provide yet';
const NO_API = 'it scrapes a site that offers no public API to call';
const REGIONAL = 'it calls a regional market-data service Easel does not integrate';

/** Tool kind → why Easel does not offer it. */
export const REFUSED_TOOLS: Readonly<Record<string, string>> = {
  CodeExec: LATER,
  ExeSQL: LATER,
  YahooFinance: NO_API,
  AkShare: REGIONAL,
  TuShare: REGIONAL,
  Jin10: REGIONAL,
  WenCai: REGIONAL,
  QWeather: 'Easel does not integrate the QWeather service',
  DeepL: 'Easel does not integrate DeepL translation',
  BGPT: 'Easel does not integrate the BGPT paper service',
  Keenable: 'Easel does not integrate the Keenable service',
  Querit: 'Easel does not integrate the Querit service',
  GoogleScholar: NO_API,
  DuckDuckGo: 'DuckDuckGo offers no public web-search API to call',
  Bing: 'RAGFlow has no implementation of it, and the Bing Search APIs are retired',
};

/** Why `kind` is refused, or undefined for a kind Easel does not know at all. */
export function refusalOf(kind: string): string | undefined {
  return Object.hasOwn(REFUSED_TOOLS, kind) ? REFUSED_TOOLS[kind] : undefined;
}
