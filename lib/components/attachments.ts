/**
 * Files shown to a model, as RAGFlow's LLM and Agent show them: images become image parts of
 * the last user message, documents become text appended to it.
 *
 * Where they come from:
 * - `visual_files_var` (e.g. `sys.files`, `begin@photo`): the images in that variable;
 * - the variables the prompts reference: the images among their values (a file field's value
 *   is its file; the prompt still reads the value as text);
 * - `sys.files` (the files sent with the turn), images and documents, unless a prompt names
 *   `{sys.files}` itself.
 * A file is a file descriptor `{file_id, name, mime_type, ...}` (read through the run's
 * `files` service), a `data:image/...;base64,` URL, or (in `sys.files`) a string of text.
 *
 * Limits (`AttachmentLimits`, from the run's services): an image over `maxImageBytes`, or
 * images beyond `maxImages` / `maxImagesBytes` in one call, are refused: the component fails
 * with a message naming the file and the limit, and no model is called. Document text is cut
 * at `maxDocumentChars` per call, with a marker saying so. A file that cannot be read (PDF,
 * Office, other binaries, a deleted file) is named in a marker in its place.
 */
import { createHash } from 'node:crypto';
import type { ComponentContext } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { findReferences, isRecord } from '../canvas/references';
import { type ChatMessage, type ContentPart, contentImages, contentText, type ImagePart, isImageMimeType } from '../llm/types';
import { classify, looksLikeImage, READABLE, sniffImage } from './file-kinds';
import { type ComponentServices, filesOf } from './services';

export interface AttachmentLimits {
  /** Bytes of one image. @default 3932160 (3.75 MiB, Bedrock's limit) */
  maxImageBytes: number;
  /** Bytes of all images of one model call. @default 10485760 (10 MiB) */
  maxImagesBytes: number;
  /** Images in one model call. @default 20 (Bedrock's limit) */
  maxImages: number;
  /** Characters of document text in one model call, all documents together. @default 100000 */
  maxDocumentChars: number;
}

export const DEFAULT_ATTACHMENT_LIMITS: Readonly<AttachmentLimits> = Object.freeze({
  maxImageBytes: 3_932_160,
  maxImagesBytes: 10 * 1024 * 1024,
  maxImages: 20,
  maxDocumentChars: 100_000,
});

/** The params that choose what is shown (LLM's and Agent's). */
export interface AttachmentParams {
  visual_files_var?: string | null | undefined;
  sys_prompt: string;
  prompts: readonly { content: string }[];
}

/** A file as a variable holds it: a descriptor, an image URL, or text. */
type Found =
  | { kind: 'file'; id: string; name: string; mime_type: string; text?: string }
  | { kind: 'data'; mime_type: string; base64: string }
  | { kind: 'text'; text: string };

const FILE_ID = /^file_[0-9a-f]{32}$/;
const DATA_IMAGE = /^data:(image\/[A-Za-z0-9.+-]+);base64,([A-Za-z0-9+/=\s]*)$/;
const MAX_DEPTH = 8;

/** The files in a value, in order: descriptors, `data:image/` URLs and (`texts`) other strings. */
function findFiles(value: unknown, texts: boolean, out: Found[] = [], depth = 0): Found[] {
  if (depth > MAX_DEPTH || value === null || value === undefined) return out;
  if (typeof value === 'string') {
    const data = DATA_IMAGE.exec(value.trim());
    if (data) out.push({ kind: 'data', mime_type: data[1] as string, base64: data[2] as string });
    else if (texts && value.trim() !== '') out.push({ kind: 'text', text: value });
  } else if (Array.isArray(value)) {
    for (const item of value) findFiles(item, texts, out, depth + 1);
  } else if (isRecord(value)) {
    if (typeof value.file_id === 'string' && FILE_ID.test(value.file_id)) {
      out.push({
        kind: 'file',
        id: value.file_id,
        name: typeof value.name === 'string' ? value.name : value.file_id,
        mime_type: typeof value.mime_type === 'string' ? value.mime_type : 'application/octet-stream',
        ...(typeof value.text === 'string' ? { text: value.text } : {}),
      });
    } else if ('value' in value && 'type' in value) {
      findFiles(value.value, texts, out, depth + 1);
    } else {
      for (const item of Object.values(value)) findFiles(item, false, out, depth + 1);
    }
  }
  return out;
}

const isImageRef = (f: Found) => f.kind === 'data' || (f.kind === 'file' && looksLikeImage(f.mime_type, f.name));

/** Whether a prompt names `{sys.files}` itself (then it is not added again, as in RAGFlow). */
function namesSysFiles(p: AttachmentParams): boolean {
  return [p.sys_prompt, ...p.prompts.map((x) => x.content)].some((t) => findReferences(t).some((r) => r.kind === 'global' && r.name === 'sys.files'));
}

/** What a call shows: image parts and the text blocks for the documents (markers included). */
export interface Attachments {
  images: ImagePart[];
  text: string[];
}

/** Collects and reads the files the params show, within the limits. */
export async function collectAttachments(p: AttachmentParams, ctx: ComponentContext): Promise<Attachments> {
  const found: Found[] = [];
  if (p.visual_files_var && p.visual_files_var.trim() !== '') {
    found.push(...findFiles(await ctx.get(p.visual_files_var), false).filter(isImageRef));
  }
  const refs = [p.sys_prompt, ...p.prompts.map((x) => x.content)].flatMap((t) => findReferences(t));
  for (const ref of refs) found.push(...findFiles(await ctx.get(ref.raw), false).filter(isImageRef));
  if (!namesSysFiles(p)) found.push(...findFiles(await ctx.get('sys.files'), true));
  if (found.length === 0) return { images: [], text: [] };

  const limits = { ...DEFAULT_ATTACHMENT_LIMITS, ...(ctx.services as ComponentServices).attachmentLimits };
  const images: { part: ImagePart; name: string }[] = [];
  const text: string[] = [];
  const seen = new Set<string>();
  let chars = 0;
  /** Document text within the call's budget; `frame` names the document around its text. */
  const addText = (body: string, frame?: { name: string; label: string }) => {
    const room = limits.maxDocumentChars - chars;
    if (room <= 0) {
      text.push(`[${frame?.label ?? 'a text'} is left out: the documents of one call are limited to ${limits.maxDocumentChars} characters of text]`);
      return;
    }
    const shown = body.length > room ? body.slice(0, room) : body;
    chars += shown.length;
    const cut = body.length > room ? `\n[${frame?.name ?? 'this text'} is cut here: it has ${body.length} characters; the documents of one call are limited to ${limits.maxDocumentChars}]` : '';
    text.push(frame ? `--- ${frame.label} ---\n${shown}${cut}\n--- end of ${frame.name} ---` : `${shown}${cut}`);
  };
  const addImage = (part: ImagePart, name: string) => {
    if (part.bytes.byteLength > limits.maxImageBytes) {
      throw new ComponentError(`the image ${name} is ${size(part.bytes.byteLength)}; an image shown to a model may have at most ${size(limits.maxImageBytes)}`);
    }
    images.push({ part, name });
    if (images.length > limits.maxImages) throw new ComponentError(`${images.length} images for one model call; at most ${limits.maxImages} are allowed`);
    const total = images.reduce((n, i) => n + i.part.bytes.byteLength, 0);
    if (total > limits.maxImagesBytes) {
      throw new ComponentError(`the images of one model call come to ${size(total)} with ${name}; at most ${size(limits.maxImagesBytes)} are allowed`);
    }
  };

  const firstSight = (bytes: Uint8Array, sha?: string) => {
    const key = sha ?? createHash('sha256').update(bytes).digest('hex');
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };

  for (const f of found) {
    if (f.kind === 'text') {
      addText(f.text);
      continue;
    }
    if (f.kind === 'data') {
      const bytes = Buffer.from(f.base64, 'base64');
      if (!firstSight(bytes)) continue;
      const mime = sniffImage(bytes) ?? f.mime_type;
      if (!isImageMimeType(mime)) text.push(`[an image of type ${f.mime_type} is not included: only ${READABLE} are read]`);
      else addImage({ type: 'image', mime_type: mime, bytes }, 'given as a data URL');
      continue;
    }
    if (seen.has(f.id)) continue;
    seen.add(f.id);
    const frame = { name: f.name, label: `${f.name} (${f.mime_type})` };
    if (!(ctx.services as ComponentServices).files && f.text !== undefined && !looksLikeImage(f.mime_type, f.name)) {
      // a host without file storage: the text the descriptor carries is all there is
      addText(f.text, frame);
      continue;
    }
    const content = await filesOf(ctx).read(f.id);
    if (!content) {
      text.push(`[${frame.label} is not included: the file no longer exists]`);
      continue;
    }
    if (!firstSight(content.bytes, content.sha256)) continue;
    const kind = classify(content.bytes, content.mime_type, content.name);
    if (kind.kind === 'image') addImage({ type: 'image', mime_type: kind.mime_type, bytes: content.bytes }, f.name);
    else if (kind.kind === 'text') addText(kind.text, frame);
    else text.push(`[${frame.label} is not included: ${kind.why}; only ${READABLE} are read]`);
  }
  return { images: images.map((i) => i.part), text };
}

/**
 * The messages with the attachments on the last user message (a new one when there is none):
 * images first, then its text with the documents after a blank line. Unchanged without any.
 */
export function attach(messages: readonly ChatMessage[], attachments: Attachments): ChatMessage[] {
  const out = [...messages];
  if (attachments.images.length === 0 && attachments.text.length === 0) return out;
  let index = -1;
  for (let i = out.length - 1; i >= 0; i--) {
    if (out[i]?.role === 'user') {
      index = i;
      break;
    }
  }
  const current = index >= 0 ? (out[index] as ChatMessage).content : '';
  const text = [contentText(current), ...attachments.text].filter((t) => t !== '').join('\n\n');
  const images = [...contentImages(current), ...attachments.images];
  const content: ContentPart[] = [...images, ...(text !== '' ? [{ type: 'text' as const, text }] : [])];
  const message: ChatMessage = { role: 'user', content: images.length > 0 ? content : text };
  if (index >= 0) out[index] = { ...(out[index] as ChatMessage), ...message };
  else out.push(message);
  return out;
}

/** The messages with the files the params show (see `collectAttachments`). */
export async function attachFiles(p: AttachmentParams, ctx: ComponentContext, messages: readonly ChatMessage[]): Promise<ChatMessage[]> {
  return attach(messages, await collectAttachments(p, ctx));
}

function size(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(2)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} bytes`;
}
