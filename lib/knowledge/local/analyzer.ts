/**
 * The text analyzer of the local full-text index: the same function turns chunks and questions
 * into terms, so whatever a question can say a chunk can be found by.
 *
 * - NFKC, lower case, Latin diacritics folded (`café` → `cafe`);
 * - words are runs of letters, marks and digits (`_` joins, as in identifiers; `.` and `,` join
 *   digits only, so `3.14` stays one term and `end.Next` is two);
 * - English stop words dropped, `'s` dropped, the rest lightly stemmed (Porter's steps 1 and 5:
 *   plurals, `-ed`, `-ing`, a final `e`), so `indexes`/`indexed`/`indexing` meet at `index`;
 * - CJK text (Han, Hiragana, Katakana, Hangul), which has no spaces to split on, as overlapping
 *   character bigrams (`知识库` → `知识`, `识库`); a chunk also carries each CJK character alone
 *   (`unigrams`), so a one-character question still finds it.
 *
 * @example
 * terms('The indexes were rebuilt')           // ['index', 'rebuilt']
 * spans('知识库').map((s) => s.term)           // ['知识', '识库']
 */

export interface TermSpan {
  term: string;
  /** UTF-16 offsets into the text as given (before normalisation). */
  start: number;
  end: number;
}

export interface AnalyzeOptions {
  /** Also emit each CJK character as a term (index side). @default false */
  unigrams?: boolean;
}

/** The analyzed terms of a text, in order, repeats kept. */
export function terms(text: string, options: AnalyzeOptions = {}): string[] {
  const out: string[] = [];
  analyze(text, options.unigrams ?? false, (term) => out.push(term));
  return out;
}

/** The analyzed terms with where each came from, for highlighting. */
export function spans(text: string, options: AnalyzeOptions = {}): TermSpan[] {
  const out: TermSpan[] = [];
  analyze(text, options.unigrams ?? false, (term, start, end) => out.push({ term, start, end }));
  return out;
}

/** Receives each term with its offsets. */
type Emit = (term: string, start: number, end: number) => void;

function analyze(text: string, unigrams: boolean, emit: Emit): void {
  for (const match of text.matchAll(WORD)) splitWord(match[0], match.index, emit, unigrams);
}

/** Letters, marks, digits and the joiners worth looking at; the joiners are decided below. */
const WORD = /[\p{L}\p{M}\p{N}]+(?:[_.,'’][\p{L}\p{M}\p{N}]+)*/gu;
const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const DIGIT = /\p{N}/u;
const LATIN_MARKS = /(\p{Script=Latin})\p{M}+/gu;

function splitWord(word: string, offset: number, emit: Emit, unigrams: boolean): void {
  if (!JOINERS.test(word)) {
    splitScripts(word, offset, emit, unigrams);
    return;
  }
  // Split at joiners that do not join: `.`/`,` not between digits, apostrophes; `'s` goes.
  let pieceStart = 0;
  for (let i = 0; i <= word.length; i++) {
    const ch = word[i];
    const atEnd = i === word.length;
    if (!atEnd && ch !== '.' && ch !== ',' && ch !== "'" && ch !== '’') continue;
    if (!atEnd && (ch === '.' || ch === ',') && DIGIT.test(word[i - 1] ?? '') && DIGIT.test(word[i + 1] ?? '')) continue;
    const piece = word.slice(pieceStart, i);
    if (piece !== '') splitScripts(piece, offset + pieceStart, emit, unigrams);
    if (!atEnd && (ch === "'" || ch === '’') && POSSESSIVE.test(word.slice(i + 1))) {
      // `user's` → `user`; the loop's i++ then moves past whatever follows the `s`
      i += 2;
    }
    pieceStart = i + 1;
  }
}

const JOINERS = /[.,'’]/;
const POSSESSIVE = /^[sS](?![\p{L}\p{M}\p{N}])/u;

/** A piece of one word: CJK runs become bigrams, the rest one term. */
function splitScripts(piece: string, offset: number, emit: Emit, unigrams: boolean): void {
  if (!MAYBE_CJK.test(piece)) {
    latinTerm(piece, offset, offset + piece.length, emit);
    return;
  }
  let runStart = 0;
  let runIsCjk = CJK.test(piece[0] ?? '');
  const flush = (end: number) => {
    if (end <= runStart) return;
    if (runIsCjk) cjkTerms(piece, runStart, end, offset, emit, unigrams);
    else latinTerm(piece.slice(runStart, end), offset + runStart, offset + end, emit);
  };
  for (let i = 0; i < piece.length; ) {
    const codePoint = piece.codePointAt(i)!;
    const width = codePoint > 0xffff ? 2 : 1;
    const isCjk = CJK.test(String.fromCodePoint(codePoint));
    if (isCjk !== runIsCjk) {
      flush(i);
      runStart = i;
      runIsCjk = isCjk;
    }
    i += width;
  }
  flush(piece.length);
}

/** Every CJK script starts past U+1100 (Hangul Jamo); most text never gets to the exact test. */
const MAYBE_CJK = /[\u1100-\uffff]/;

function cjkTerms(piece: string, start: number, end: number, offset: number, emit: Emit, unigrams: boolean): void {
  const chars: { text: string; at: number }[] = [];
  for (let i = start; i < end; ) {
    const text = String.fromCodePoint(piece.codePointAt(i)!);
    chars.push({ text: text.normalize('NFKC').toLowerCase(), at: i });
    i += text.length;
  }
  const endOf = (k: number) => (k + 1 < chars.length ? chars[k + 1]!.at : end);
  if (chars.length === 1) {
    emit(chars[0]!.text, offset + chars[0]!.at, offset + end);
    return;
  }
  for (let k = 0; k < chars.length; k++) {
    const here = chars[k]!;
    if (unigrams) emit(here.text, offset + here.at, offset + endOf(k));
    if (k + 1 < chars.length) {
      emit(here.text + chars[k + 1]!.text, offset + here.at, offset + endOf(k + 1));
    }
  }
}

function latinTerm(raw: string, start: number, end: number, emit: Emit): void {
  let term = analyzed.get(raw);
  if (term === undefined) {
    term = wordTerm(raw);
    // words follow Zipf's law: a small cache answers most of them
    if (analyzed.size >= CACHE_LIMIT) analyzed.clear();
    analyzed.set(raw, term);
  }
  if (term !== null) emit(term, start, end);
}

const CACHE_LIMIT = 100_000;
const analyzed = new Map<string, string | null>();

/** One non-CJK word as a term, or null for a stop word. */
function wordTerm(raw: string): string | null {
  const lower = /^[\x00-\x7f]*$/.test(raw)
    ? raw.toLowerCase()
    : raw.normalize('NFKC').toLowerCase().normalize('NFD').replace(LATIN_MARKS, '$1').normalize('NFC');
  const term = lower.replace(/^_+|_+$/g, '');
  if (term === '' || STOP_WORDS.has(term)) return null;
  return stem(term);
}

/**
 * Porter's steps 1 and 5: plurals, the `-ed`/`-ing` forms and a final `e`, nothing that changes
 * what a word means (`generalization` stays as it is). Words with digits or of 3 letters or
 * fewer are left alone.
 */
export function stem(word: string): string {
  if (word.length <= 3 || DIGIT.test(word) || !/^[a-z]+$/.test(word)) return word;
  let w = word;
  // 1a
  if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('ies')) w = w.slice(0, -2);
  else if (w.endsWith('ss')) {
    // unchanged
  } else if (w.endsWith('s') && !w.endsWith('us') && !w.endsWith('is')) w = w.slice(0, -1);
  // 1b
  if (w.endsWith('eed')) {
    if (measure(w.slice(0, -3)) > 0) w = w.slice(0, -1);
  } else {
    const suffix = w.endsWith('ed') ? 2 : w.endsWith('ing') ? 3 : 0;
    if (suffix > 0 && hasVowel(w.slice(0, -suffix))) {
      w = w.slice(0, -suffix);
      if (w.endsWith('at') || w.endsWith('bl') || w.endsWith('iz')) w += 'e';
      else if (endsWithDoubleConsonant(w) && !/[lsz]$/.test(w)) w = w.slice(0, -1);
      else if (measure(w) === 1 && endsCvc(w)) w += 'e';
    }
  }
  // 1c
  if (w.endsWith('y') && hasVowel(w.slice(0, -1))) w = `${w.slice(0, -1)}i`;
  // 5: a final e or double l goes, so `index`/`indexes` and `rate`/`rated` meet
  if (w.endsWith('e')) {
    const base = w.slice(0, -1);
    const m = measure(base);
    if (m > 1 || (m === 1 && !endsCvc(base))) w = base;
  }
  if (w.endsWith('ll') && measure(w) > 1) w = w.slice(0, -1);
  return w;
}

function isConsonant(w: string, i: number): boolean {
  const c = w[i]!;
  if ('aeiou'.includes(c)) return false;
  if (c === 'y') return i === 0 || !isConsonant(w, i - 1);
  return true;
}

/** Porter's m: the number of vowel-consonant sequences. */
function measure(w: string): number {
  let m = 0;
  let i = 0;
  while (i < w.length && isConsonant(w, i)) i++;
  while (i < w.length) {
    while (i < w.length && !isConsonant(w, i)) i++;
    if (i >= w.length) break;
    while (i < w.length && isConsonant(w, i)) i++;
    m++;
  }
  return m;
}

function hasVowel(w: string): boolean {
  for (let i = 0; i < w.length; i++) if (!isConsonant(w, i)) return true;
  return false;
}

function endsWithDoubleConsonant(w: string): boolean {
  const n = w.length;
  return n >= 2 && w[n - 1] === w[n - 2] && isConsonant(w, n - 1);
}

function endsCvc(w: string): boolean {
  const n = w.length;
  return n >= 3 && isConsonant(w, n - 3) && !isConsonant(w, n - 2) && isConsonant(w, n - 1) && !/[wxy]$/.test(w);
}

/** English function words (the common search-engine list, apostrophes removed). */
export const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again against all am an and any are aren as at be because been before being below between both ' +
    'but by can couldn d did didn do does doesn doing don down during each few for from further had hadn has hasn have ' +
    'haven having he her here hers herself him himself his how i if in into is isn it its itself just ll m ma me mightn ' +
    'more most mustn my myself needn no nor not now o of off on once only or other our ours ourselves out over own re s ' +
    'same shan she should shouldn so some such t than that the their theirs them themselves then there these they this ' +
    'those through to too under until up ve very was wasn we were weren what when where which while who whom why will ' +
    'with won wouldn y you your yours yourself yourselves'
  ).split(' '),
);
