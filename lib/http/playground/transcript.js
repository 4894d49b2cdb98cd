// @ts-check
/**
 * The conversation as the playground shows it, and the events of one turn as they arrive or
 * are read back: what the user sent, the assistant's messages rendered as sanitized markdown
 * (markdown.js) with their citations and sources, an Agent's tool calls in a compact list,
 * notes, and every event on the side panel's timeline.
 */

import { display, h } from './fields.js';
import { renderMarkdown } from './markdown.js';

/** @typedef {import('./markdown.js').Reference} Reference */
/** @typedef {import('./markdown.js').Chunk} Chunk */
/** @typedef {{name?: unknown, arguments?: unknown, result?: unknown, calls?: ToolCall[]}} ToolCall */

/** How often a streaming message is rendered again, at most. */
const RENDER_EVERY_MS = 50;
/** What a tool call's result shows of itself. */
const RESULT_CHARS = 400;

export class Transcript {
  /** @param {HTMLOListElement} list the conversation @param {HTMLOListElement} timeline the side panel's events */
  constructor(list, timeline) {
    this.list = list;
    this.timeline = timeline;
  }

  /** Appends, following the bottom unless the reader scrolled up. @template {HTMLElement} T @param {T} entry @returns {T} */
  add(entry) {
    const list = this.list;
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 80;
    list.append(entry);
    if (atBottom) list.scrollTop = list.scrollHeight;
    return entry;
  }

  followBottom() {
    const list = this.list;
    if (list.scrollHeight - list.scrollTop - list.clientHeight < 160) list.scrollTop = list.scrollHeight;
  }

  clear() {
    this.list.replaceChildren();
    this.timeline.replaceChildren();
  }

  /** @param {string} text */
  user(text) {
    return this.add(h('li', { class: 'entry user' }, [h('span', { class: 'who', text: 'You' }), h('p', { class: 'text', text })]));
  }

  /** Answers to a form, named by its labels (not added: the caller places it). @param {[string, string][]} rows */
  answers(rows) {
    const list = h('dl', { class: 'answers' });
    for (const [label, value] of rows) list.append(h('dt', { text: label }), h('dd', { text: value }));
    return h('li', { class: 'entry user' }, [h('span', { class: 'who', text: 'You answered' }), rows.length ? list : h('p', { class: 'text muted', text: '(nothing)' })]);
  }

  /** The workflow's prologue, what it says before any turn: first in the conversation. @param {string} text */
  prologue(text) {
    const body = h('div', { class: 'text md' });
    body.replaceChildren(renderMarkdown(text).fragment);
    const entry = h('li', { class: 'entry assistant prologue' }, [h('span', { class: 'who', text: 'Assistant' }), body]);
    this.list.prepend(entry);
    return entry;
  }

  /** @param {string} text @param {'info' | 'error' | 'done' | 'warn'} [kind] */
  note(text, kind = 'info') {
    return this.add(h('li', { class: `entry note note-${kind}`, text }));
  }

  /** @param {HTMLElement} entry @param {string} why */
  markNotSent(entry, why) {
    entry.classList.add('failed');
    entry.append(h('span', { class: 'failed-tag', text: why }));
  }
}

/** The events of one turn, live (streamed) or read back from its record. */
export class TurnView {
  /** @param {Transcript} transcript @param {number} turn @param {boolean} live */
  constructor(transcript, turn, live) {
    this.transcript = transcript;
    this.turn = turn;
    this.live = live;
    this.started = performance.now();
    /** @type {{entry: HTMLElement, body: HTMLElement, raw: string, renderedAt: number, dirty: boolean} | null} */
    this.open = null;
    /** @type {HTMLElement[]} */
    this.bubbles = [];
    /** @type {HTMLElement | null} */
    this.chunkItem = null;
    this.chunks = 0;
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.pendingRender = null;
  }

  /** @param {string} name @param {any} data */
  onEvent(name, data) {
    if (name === 'message') {
      this.message(typeof data?.content === 'string' ? data.content : display(data?.content));
      return;
    }
    this.chunkItem = null;
    if (name === 'message_end') this.endMessage(data?.reference ?? null);
    const calls = name === 'node_finished' && Array.isArray(data?.outputs?.use_tools) ? /** @type {ToolCall[]} */ (data.outputs.use_tools) : [];
    this.timeline(name, eventDetail(name, data), name === 'workflow_failed' || Boolean(data?.error) ? 'error' : '');
    if (calls.length > 0) this.toolCalls(String(data?.component_name ?? data?.component_id ?? 'Agent'), calls);
    const transcript = this.transcript;
    if (name === 'workflow_failed') transcript.note(`The workflow failed: ${data?.error?.message ?? 'unknown error'}`, 'error');
    else if (name === 'workflow_cancelled') transcript.note('The run was cancelled.');
    else if (name === 'workflow_aborted') transcript.note(`The run was stopped by the loop-safety budget (${data?.steps ?? '?'} steps).`, 'error');
  }

  /** @param {string} delta */
  message(delta) {
    if (!this.open) {
      const body = h('div', { class: 'text md' });
      const entry = this.transcript.add(h('li', { class: 'entry assistant', 'aria-busy': this.live ? 'true' : null }, [h('span', { class: 'who', text: 'Assistant' }), body]));
      this.open = { entry, body, raw: '', renderedAt: -Infinity, dirty: false };
      this.bubbles.push(entry);
    }
    this.open.raw += delta;
    this.open.dirty = true;
    // a long answer is parsed again at most every RENDER_EVERY_MS while it streams, and once at its end
    if (!this.live || performance.now() - this.open.renderedAt >= RENDER_EVERY_MS) this.render(null);
    else this.pendingRender ??= setTimeout(() => this.render(null), RENDER_EVERY_MS);
    this.chunks += 1;
    if (!this.chunkItem) {
      this.chunks = 1;
      this.chunkItem = this.timeline('message', '');
    }
    const detail = this.chunkItem.querySelector('.ev-detail');
    if (detail) detail.textContent = this.live ? `${this.chunks} chunk${this.chunks === 1 ? '' : 's'}` : '';
  }

  /** The open message as markdown; with the references of its `message_end`, its citations too. @param {Reference | null} reference */
  render(reference) {
    if (this.pendingRender !== null) clearTimeout(this.pendingRender);
    this.pendingRender = null;
    const open = this.open;
    if (!open) return null;
    const { fragment, cited } = renderMarkdown(open.raw, reference);
    open.body.replaceChildren(fragment);
    open.renderedAt = performance.now();
    open.dirty = false;
    this.transcript.followBottom();
    return cited;
  }

  /** @param {Reference | null} [reference] */
  endMessage(reference = null) {
    const open = this.open;
    if (!open) return;
    if (open.dirty || reference) {
      const cited = this.render(reference) ?? [];
      const sources = sourcesList(cited, reference);
      if (sources) open.entry.append(sources);
    }
    open.entry.removeAttribute('aria-busy');
    this.open = null;
  }

  /** An Agent's tool calls, each with its arguments and the start of its result. @param {string} component @param {ToolCall[]} calls */
  toolCalls(component, calls) {
    const names = calls.map((c) => String(c.name ?? '?'));
    const summary = `${component} called ${calls.length === 1 ? 'a tool' : `${calls.length} tools`}: ${[...new Set(names)].join(', ')}`;
    this.transcript.add(h('li', { class: 'entry tools' }, [h('details', {}, [h('summary', { text: summary }), callList(calls)])]));
  }

  /** @param {string} name @param {string} detail @param {string} [kind] */
  timeline(name, detail, kind = '') {
    const item = h('li', { class: `ev${kind ? ` ev-${kind}` : ''}` }, [
      h('span', { class: 'ev-turn', text: `T${this.turn}`, title: `turn ${this.turn}` }),
      h('span', { class: 'ev-name', text: name }),
      h('span', { class: 'ev-detail', text: detail }),
      this.live ? h('time', { class: 'ev-time', text: `+${Math.round(performance.now() - this.started)} ms` }) : null,
    ]);
    const timeline = this.transcript.timeline;
    timeline.append(item);
    timeline.scrollTop = timeline.scrollHeight;
    return item;
  }

  finish() {
    this.endMessage();
  }

  /** The streamed events were not committed (turn_error): say so on what was shown. */
  discard() {
    for (const b of this.bubbles) this.transcript.markNotSent(b, 'not committed');
  }
}

/** @param {ToolCall[]} calls @returns {HTMLOListElement} */
function callList(calls) {
  return h('ol', { class: 'tool-calls' }, calls.map((c) => {
    const result = display(c.result);
    return h('li', {}, [
      h('code', { class: 'tool-name', text: String(c.name ?? '?') }),
      h('code', { class: 'tool-args', text: display(c.arguments ?? {}) }),
      h('p', { class: 'tool-result', text: result.length > RESULT_CHARS ? `${result.slice(0, RESULT_CHARS)}…` : result }),
      Array.isArray(c.calls) && c.calls.length > 0 ? callList(c.calls) : null,
    ]);
  }));
}

/** @param {unknown} url */
const webUrl = (url) => (typeof url === 'string' && /^https?:\/\//i.test(url) ? url : null);

/**
 * The sources under a message: the chunks it cited, numbered as its marks; when it cited none,
 * the documents its pass found.
 * @param {Chunk[]} cited @param {Reference | null} reference
 */
function sourcesList(cited, reference) {
  if (cited.length > 0) {
    const items = cited.map((chunk, k) => {
      const name = chunk.document_name || 'source';
      const url = webUrl(chunk.url);
      const snippet = (chunk.content ?? '').trim();
      return h('li', { value: k + 1 }, [
        url ? h('a', { href: url, target: '_blank', rel: 'noopener noreferrer', text: name }) : h('strong', { text: name }),
        snippet ? h('span', { class: 'snippet', text: ` ${snippet.length > 200 ? `${snippet.slice(0, 200)}…` : snippet}` }) : null,
      ]);
    });
    return h('details', { class: 'sources' }, [h('summary', { text: `Sources (${cited.length})` }), h('ol', {}, items)]);
  }
  const docs = Object.keys(reference?.doc_aggs ?? {});
  if (docs.length === 0) return null;
  return h('p', { class: 'sources note', text: `Found in: ${docs.join(', ')}` });
}

/** @param {string} name @param {any} data */
export function eventDetail(name, data) {
  switch (name) {
    case 'node_started':
      return String(data?.component_name ?? data?.component_id ?? '');
    case 'node_finished': {
      const tools = Array.isArray(data?.outputs?.use_tools) ? data.outputs.use_tools.length : 0;
      return `${data?.component_name ?? data?.component_id ?? ''}${tools ? ` (${tools} tool call${tools === 1 ? '' : 's'})` : ''}${data?.error ? `: ${data.error}` : ''}`;
    }
    case 'message_end': {
      const chunks = Object.keys(data?.reference?.chunks ?? {}).length;
      return chunks ? `${chunks} reference${chunks === 1 ? '' : 's'}` : '';
    }
    case 'user_inputs':
      return `asks: ${Object.keys(data?.inputs ?? {}).join(', ')}`;
    case 'workflow_finished':
      return typeof data?.elapsed_time === 'number' ? `${data.elapsed_time.toFixed(3)} s` : '';
    case 'workflow_failed':
      return String(data?.error?.message ?? '');
    default:
      return '';
  }
}
