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
  return spans(text, options).map((s) => s.term);
}

/** The analyzed terms with where each came from, for highlighting. */
export function spans(text: string, options: AnalyzeOptions = {}): TermSpan[] {
  const out: TermSpan[] = [];
  for (const match of text.matchAll(WORD)) {
    const start = match.index;
    splitWord(match[0], start, out, options.unigrams ?? false);
  }
  return out;
}

/** Letters, marks, digits and the joiners worth looking at; the joiners are decided below. */
const WORD = /[\p{L}\p{M}\p{N}]+(?:[_.,'’][\p{L}\p{M}\p{N}]+)*/gu;
const CJK = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;
const DIGIT = /\p{N}/u;
const LATIN_MARKS = /(\p{Script=Latin})\p{M}+/gu;

function splitWord(word: string, offset: number, out: TermSpan[], unigrams: boolean): void {
  // Split at joiners that do not join: `.`/`,` not between digits, apostrophes not before `s`.
  let pieceStart = 0;
  for (let i = 0; i <= word.length; i++) {
    const ch = word[i];
    const atEnd = i === word.length;
    if (!atEnd && ch !== '.' && ch !== ',' && ch !== "'" && ch !== '’') continue;
    if (!atEnd && (ch === '.' || ch === ',') && DIGIT.test(word[i - 1] ?? '') && DIGIT.test(word[i + 1] ?? '')) continue;
    const piece = word.slice(pieceStart, i);
    if (piece !== '') splitScripts(piece, offset + pieceStart, out, unigrams);
    if (!atEnd && (ch === "'" || ch === '’')) {
      // `user's` → `user`; `don't` → `don`, `t` (both stop words)
      const rest = word.slice(i + 1);
      const possessive = /^[sS](?![\p{L}\p{M}\p{N}])/u.test(rest);
      if (possessive) {
        i += 2;
        pieceStart = i + 1;
        // the loop's i++ moves past whatever follows `'s` (a joiner or the end)
        continue;
      }
    }
    pieceStart = i + 1;
  }
}

/** A piece of one word: CJK runs become bigrams, the rest one term. */
function splitScripts(piece: string, offset: number, out: TermSpan[], unigrams: boolean): void {
  let runStart = 0;
  let runIsCjk = CJK.test(piece[0] ?? '');
  const flush = (end: number) => {
    if (end <= runStart) return;
    if (runIsCjk) cjkTerms(piece, runStart, end, offset, out, unigrams);
    else latinTerm(piece.slice(runStart, end), offset + runStart, offset + end, out);
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

function cjkTerms(piece: string, start: number, end: number, offset: number, out: TermSpan[], unigrams: boolean): void {
  const chars: { text: string; at: number }[] = [];
  for (let i = start; i < end; ) {
    const text = String.fromCodePoint(piece.codePointAt(i)!);
    chars.push({ text: text.normalize('NFKC').toLowerCase(), at: i });
    i += text.length;
  }
  const endOf = (k: number) => (k + 1 < chars.length ? chars[k + 1]!.at : end);
  if (chars.length === 1) {
    out.push({ term: chars[0]!.text, start: offset + chars[0]!.at, end: offset + end });
    return;
  }
  for (let k = 0; k < chars.length; k++) {
    const here = chars[k]!;
    if (unigrams) out.push({ term: here.text, start: offset + here.at, end: offset + endOf(k) });
    if (k + 1 < chars.length) {
      out.push({ term: here.text + chars[k + 1]!.text, start: offset + here.at, end: offset + endOf(k + 1) });
    }
  }
}

function latinTerm(raw: string, start: number, end: number, out: TermSpan[]): void {
  const normal = raw.normalize('NFKC').toLowerCase().normalize('NFD').replace(LATIN_MARKS, '$1').normalize('NFC');
  const term = normal.replace(/^_+|_+$/g, '');
  if (term === '' || STOP_WORDS.has(term)) return;
  out.push({ term: stem(term), start, end });
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
