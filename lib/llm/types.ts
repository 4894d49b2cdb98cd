/**
 * The one interface every model provider implements: a chat call that streams text deltas
 * and complete tool calls, then ends with the usage. Providers are bound to a model by the
 * resolver (models.ts); components only see `ChatModel`.
 */

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as the model wrote them: JSON text. */
  arguments: string;
}

/** A piece of text in a message's content. */
export interface TextPart {
  type: 'text';
  text: string;
}

/** The image formats every provider takes (Bedrock Converse's set; OpenAI-compatible APIs take them too). */
export const IMAGE_MIME_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export type ImageMimeType = (typeof IMAGE_MIME_TYPES)[number];

/** An image in a message's content, as bytes: providers encode it as their protocol wants. */
export interface ImagePart {
  type: 'image';
  mime_type: ImageMimeType;
  bytes: Uint8Array;
}

export type ContentPart = TextPart | ImagePart;

/**
 * What a message says: plain text, or parts (text and images) for a model that is shown files.
 * Providers send plain text as a string, as before; only user messages carry images.
 */
export type MessageContent = string | readonly ContentPart[];

export interface ChatMessage {
  role: ChatRole;
  content: MessageContent;
  /** On an assistant message: the calls it made. */
  tool_calls?: ToolCall[];
  /** On a tool message: the call it answers. */
  tool_call_id?: string;
}

/** The text of a message's content: a string as it is, parts' texts joined by blank lines. */
export function contentText(content: MessageContent): string {
  if (typeof content === 'string') return content;
  return content.flatMap((p) => (p.type === 'text' && p.text !== '' ? [p.text] : [])).join('\n\n');
}

/** The images of a message's content (none for a string). */
export function contentImages(content: MessageContent): ImagePart[] {
  return typeof content === 'string' ? [] : content.filter((p): p is ImagePart => p.type === 'image');
}

export function isImageMimeType(value: string): value is ImageMimeType {
  return (IMAGE_MIME_TYPES as readonly string[]).includes(value);
}

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface ChatOptions {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  /** Ask for a JSON object as the answer (structured output). */
  json?: boolean;
  signal?: AbortSignal;
}

export interface ChatRequest extends ChatOptions {
  model: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type ChatEvent =
  | { type: 'text'; text: string }
  | { type: 'tool_call'; call: ToolCall }
  | { type: 'done'; usage: Usage; finish_reason: string };

/** A provider speaks one protocol; the model is chosen per request. */
export interface ChatProvider {
  readonly name: string;
  chat(request: ChatRequest): AsyncIterable<ChatEvent>;
}

/** A provider bound to one model: what components call. */
export interface ChatModel {
  /** `<provider>:<model>`, for logs and events; never a secret. */
  readonly id: string;
  chat(options: ChatOptions): AsyncIterable<ChatEvent>;
}

export interface ChatResult {
  text: string;
  toolCalls: ToolCall[];
  usage: Usage;
  finishReason: string;
}

export const ZERO_USAGE: Usage = Object.freeze({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });

/** Runs a chat to its end and gathers the answer. */
export async function complete(model: ChatModel, options: ChatOptions): Promise<ChatResult> {
  let text = '';
  const toolCalls: ToolCall[] = [];
  let usage: Usage = ZERO_USAGE;
  let finishReason = 'stop';
  for await (const event of model.chat(options)) {
    if (event.type === 'text') text += event.text;
    else if (event.type === 'tool_call') toolCalls.push(event.call);
    else {
      usage = event.usage;
      finishReason = event.finish_reason;
    }
  }
  return { text, toolCalls, usage, finishReason };
}
