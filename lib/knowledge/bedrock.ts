/**
 * The `bedrock` backend: Amazon Bedrock Knowledge Bases `Retrieve`, with the real AWS SDK
 * (`@aws-sdk/client-bedrock-agent-runtime`), signed with the function's role (or the given
 * credentials).
 *
 * The SDK is imported on the first retrieval, not when this module loads: a turn that searches
 * no Bedrock knowledge base never pays for it. One client per region, kept for the process; the
 * SDK's own retries are off (`maxAttempts: 1`) so that one deadline (`timeoutMs`) bounds the
 * call, enforced through the SDK's `abortSignal` and, as a backstop, around it.
 *
 * The answer maps to the retriever's chunk shape: `content.text` (or a structured row as
 * `column: value` lines), the source's location as the document (its file name as `docnm_kwd`,
 * a hash of it as `doc_id`, the URI as `url`), the score as the similarity. Bedrock pages with
 * tokens, not numbers: page `p` of `top_n` asks for `p * top_n` results (at most 100) and keeps
 * the last `top_n`.
 *
 * Failures: throttling, quotas, internal errors, 5xx, timeouts and the network are
 * TransientError; a refused request (validation, access, a missing knowledge base, bad
 * credentials) is ComponentError. Messages carry the knowledge base's name and id, the AWS
 * error name and message — never credentials, which are redacted from the service's message.
 *
 * @example
 * const retrieve = createBedrockRetriever({ region: 'eu-west-1' });
 * const { chunks } = await retrieve(kb, query, { signal, secret, guard });
 */
import { createHash } from 'node:crypto';
import type {
  BedrockAgentRuntimeClient,
  KnowledgeBaseRetrievalResult,
  RetrievalFilter,
  RetrieveCommandInput,
  RetrieveCommandOutput,
} from '@aws-sdk/client-bedrock-agent-runtime';
import { ComponentError, TransientError } from '../canvas/errors';
import type { BedrockCredentials } from '../llm/bedrock';
import { isTransientStatus } from '../llm/errors';
import { redactSecrets } from '../secrets/redact';
import type { DocAgg, KnowledgeBase, RemoteRetriever, RetrievalQuery, RetrievalResult, RetrievedChunk } from './types';
import { sdkErrorFacts } from '../llm/aws-errors';

export interface BedrockRetrieverOptions {
  /** The region of knowledge bases whose settings name none: the deployment's. */
  region: string;
  /** Endpoint override for every region (tests, VPC endpoints, proxies); the regional endpoint when absent. */
  endpoint?: string;
  /** Deadline of one Retrieve call. @default 30000 */
  timeoutMs?: number;
  /** Static credentials; the SDK's default chain (the Lambda role, env, profile) when absent. */
  credentials?: BedrockCredentials;
}

export const DEFAULT_BEDROCK_RETRIEVE_TIMEOUT_MS = 30_000;
/** Retrieve's `numberOfResults` is 1..100. */
export const BEDROCK_MAX_RESULTS = 100;

/** Bedrock's own metadata keys of a result. */
const CHUNK_ID_KEY = 'x-amz-bedrock-kb-chunk-id';
const SOURCE_URI_KEY = 'x-amz-bedrock-kb-source-uri';
const MAX_QUOTED = 300;

type Sdk = typeof import('./bedrock-sdk');
let sdk: Promise<Sdk> | undefined;

function loadSdk(): Promise<Sdk> {
  sdk ??= import('./bedrock-sdk').catch((error: unknown) => {
    sdk = undefined; // a failed load is tried again on the next call
    throw error;
  });
  return sdk;
}

export function createBedrockRetriever(options: BedrockRetrieverOptions): RemoteRetriever {
  const timeoutMs = options.timeoutMs ?? DEFAULT_BEDROCK_RETRIEVE_TIMEOUT_MS;
  const secrets = options.credentials ? [options.credentials.secretAccessKey, options.credentials.sessionToken ?? '', options.credentials.accessKeyId] : [];
  const clients = new Map<string, Promise<BedrockAgentRuntimeClient>>();

  const clientFor = (region: string): Promise<BedrockAgentRuntimeClient> => {
    let client = clients.get(region);
    if (!client) {
      client = loadSdk().then(
        ({ BedrockAgentRuntimeClient }) =>
          new BedrockAgentRuntimeClient({
            region,
            ...(options.endpoint ? { endpoint: options.endpoint } : {}),
            ...(options.credentials ? { credentials: { ...options.credentials } } : {}),
            maxAttempts: 1,
          }),
      );
      client.catch(() => clients.delete(region));
      clients.set(region, client);
    }
    return client;
  };

  return async (kb, query, deps) => {
    if (kb.backend !== 'bedrock') throw new ComponentError(`knowledge base "${kb.name}" is not a Bedrock knowledge base`);
    const settings = kb.bedrock;
    const context: CallContext = {
      where: `knowledge base "${kb.name}" (Bedrock ${settings.knowledge_base_id})`,
      id: settings.knowledge_base_id,
      region: settings.region ?? options.region,
      timeoutMs,
      scrub: (text) => bounded(redactSecrets(text, secrets)),
    };
    if (query.doc_ids !== undefined && query.doc_ids.length === 0) return { chunks: [], doc_aggs: [], total: 0 };

    let client: BedrockAgentRuntimeClient;
    let RetrieveCommand: Sdk['RetrieveCommand'];
    try {
      [client, { RetrieveCommand }] = await Promise.all([clientFor(context.region), loadSdk()]);
    } catch (error) {
      throw new ComponentError(`${context.where}: the Bedrock client could not be created: ${context.scrub(messageOf(error))}`);
    }

    const deadline = new AbortController();
    const signal = AbortSignal.any([deps.signal, deadline.signal]);
    const timer = setTimeout(() => deadline.abort(new Error('deadline')), timeoutMs);
    let output: RetrieveCommandOutput;
    try {
      output = await raceAbort(client.send(new RetrieveCommand(retrieveInput(kb, query)), { abortSignal: signal }), signal);
    } catch (error) {
      throw classify(error, context, { timedOut: deadline.signal.aborted, cancelled: deps.signal.aborted });
    } finally {
      clearTimeout(timer);
    }
    return toRetrievalResult(kb, query, output.retrievalResults ?? []);
  };
}

/** The Retrieve request for `query`. Exported for tests and diagnostics. */
export function retrieveInput(kb: Extract<KnowledgeBase, { backend: 'bedrock' }>, query: RetrievalQuery): RetrieveCommandInput {
  const page = query.page ?? 1;
  return {
    knowledgeBaseId: kb.bedrock.knowledge_base_id,
    retrievalQuery: { text: query.question },
    retrievalConfiguration: {
      vectorSearchConfiguration: {
        numberOfResults: Math.max(1, Math.min(BEDROCK_MAX_RESULTS, query.top_n * page)),
        // passed as the settings hold it: Bedrock validates it
        ...(kb.bedrock.filter ? { filter: kb.bedrock.filter as unknown as RetrievalFilter } : {}),
      },
    },
  };
}

// ---- the answer ---------------------------------------------------------------------------------

/** Where a result comes from: the text that stands for it, a name for people, a URL when it has one. */
interface Source {
  location: string;
  name: string;
  url?: string;
}

function toRetrievalResult(kb: KnowledgeBase, query: RetrievalQuery, results: readonly KnowledgeBaseRetrievalResult[]): RetrievalResult {
  const wanted = query.doc_ids ? new Set(query.doc_ids) : undefined;
  const matched: RetrievedChunk[] = [];
  for (const result of results) {
    const text = textOf(result);
    if (text === undefined) continue; // an image or media segment without text: nothing to quote
    const chunk = toChunk(kb, result, text);
    if (chunk.similarity < query.similarity_threshold) continue;
    if (wanted && !wanted.has(chunk.doc_id)) continue;
    matched.push(chunk);
  }
  matched.sort((a, b) => b.similarity - a.similarity);
  const page = query.page ?? 1;
  return {
    chunks: matched.slice((page - 1) * query.top_n, page * query.top_n),
    doc_aggs: docAggs(matched),
    total: matched.length,
  };
}

function toChunk(kb: KnowledgeBase, result: KnowledgeBaseRetrievalResult, text: string): RetrievedChunk {
  const source = sourceOf(result, kb);
  const metadataChunkId = result.metadata?.[CHUNK_ID_KEY];
  const score = typeof result.score === 'number' && Number.isFinite(result.score) ? result.score : 0;
  const chunk: RetrievedChunk = {
    chunk_id: typeof metadataChunkId === 'string' && metadataChunkId !== '' ? metadataChunkId : hash(kb.id, source.location, text),
    content_with_weight: text,
    doc_id: hash(source.location),
    docnm_kwd: source.name,
    kb_id: kb.id,
    important_kwd: [],
    image_id: '',
    similarity: score,
    vector_similarity: score,
    term_similarity: 0,
    positions: [],
    doc_type_kwd: '',
  };
  if (source.url) chunk.url = source.url;
  return chunk;
}

function textOf(result: KnowledgeBaseRetrievalResult): string | undefined {
  const content = result.content;
  if (typeof content?.text === 'string' && content.text !== '') return content.text;
  // A structured data store answers rows: one `column: value` line per column.
  const row = content?.row?.filter((c) => c.columnName !== undefined);
  if (row && row.length > 0) return row.map((c) => `${c.columnName}: ${c.columnValue ?? ''}`).join('\n');
  return undefined;
}

function sourceOf(result: KnowledgeBaseRetrievalResult, kb: KnowledgeBase): Source {
  const l = result.location;
  const uri =
    l?.s3Location?.uri ??
    l?.webLocation?.url ??
    l?.confluenceLocation?.url ??
    l?.salesforceLocation?.url ??
    l?.sharePointLocation?.url ??
    l?.oneDriveLocation?.url ??
    l?.googleDriveLocation?.url ??
    l?.kendraDocumentLocation?.uri ??
    (typeof result.metadata?.[SOURCE_URI_KEY] === 'string' ? (result.metadata[SOURCE_URI_KEY] as string) : undefined);
  if (uri) return { location: uri, name: fileName(uri), url: uri };
  const custom = l?.customDocumentLocation?.id;
  if (custom) return { location: `custom:${custom}`, name: custom };
  const sql = l?.sqlLocation?.query;
  if (sql) return { location: `sql:${sql}`, name: 'SQL query' };
  return { location: `kb:${kb.id}`, name: kb.name };
}

/** The last segment of a URI's path, decoded (`s3://bucket/docs/Annual%20report.pdf` -> `Annual report.pdf`), else its host. */
export function fileName(uri: string): string {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return uri.split('/').filter(Boolean).pop() ?? uri;
  }
  const last = url.pathname.split('/').filter(Boolean).pop();
  if (!last) return url.hostname || uri;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

/** Chunks per document, most first (ties in order of first appearance), as RAGFlow counts them. */
function docAggs(chunks: readonly RetrievedChunk[]): DocAgg[] {
  const byDoc = new Map<string, DocAgg>();
  for (const chunk of chunks) {
    const agg = byDoc.get(chunk.doc_id);
    if (agg) agg.count++;
    else byDoc.set(chunk.doc_id, { doc_name: chunk.docnm_kwd, doc_id: chunk.doc_id, count: 1 });
  }
  return [...byDoc.values()].sort((a, b) => b.count - a.count);
}

/** 32 hex digits, as RAGFlow's ids. */
function hash(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 32);
}

// ---- errors -------------------------------------------------------------------------------------

interface CallContext {
  where: string;
  id: string;
  region: string;
  timeoutMs: number;
  scrub: (text: string) => string;
}

const TRANSIENT_NAMES = new Set([
  'ThrottlingException',
  'TooManyRequestsException',
  'ServiceQuotaExceededException',
  'InternalServerException',
  'ServiceUnavailableException',
  'BadGatewayException',
  'DependencyFailedException',
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
]);

const CREDENTIAL_NAMES = new Set([
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'IncompleteSignatureException',
  'MissingAuthenticationTokenException',
  'ExpiredTokenException',
  'InvalidClientTokenId',
  'CredentialsProviderError',
]);

function classify(error: unknown, context: CallContext, state: { timedOut: boolean; cancelled: boolean }): Error {
  const { where, id, region } = context;
  if (state.cancelled) return new TransientError(`${where}: the retrieval was cancelled`);
  if (state.timedOut) return new TransientError(`${where}: Bedrock did not answer within ${context.timeoutMs} ms`);

  const { name, message, status, code, fault, network } = sdkErrorFacts(error);
  const detail = context.scrub(message);
  const said = detail ? `${name}: ${detail}` : name;

  if (TRANSIENT_NAMES.has(name)) return new TransientError(`${where}: Bedrock is unavailable (${said})`);
  switch (name) {
    case 'ValidationException':
      return new ComponentError(`${where}: Bedrock refused the request (${said})`);
    case 'AccessDeniedException':
      return new ComponentError(`${where}: access was denied; the role needs bedrock:Retrieve on the knowledge base (${said})`);
    case 'ResourceNotFoundException':
      return new ComponentError(`${where}: no knowledge base ${id} in ${region} (${said})`);
  }
  if (CREDENTIAL_NAMES.has(name)) return new ComponentError(`${where}: the AWS credentials were refused (${said})`);
  if (network) {
    return new TransientError(`${where}: network error reaching Bedrock (${code ? `${code}: ${detail}` : detail})`);
  }
  // The SDK's deserializer failed on a successful status: the body is not Retrieve's answer.
  if (status !== undefined && status >= 200 && status < 300) return new ComponentError(`${where}: Bedrock's answer could not be read (HTTP ${status}, ${name})`);
  const transient = status !== undefined ? isTransientStatus(status) : fault === 'server';
  const withStatus = status !== undefined ? `HTTP ${status}, ${said}` : said;
  return transient ? new TransientError(`${where}: Bedrock is unavailable (${withStatus})`) : new ComponentError(`${where}: Bedrock refused the request (${withStatus})`);
}

function messageOf(error: unknown): string {
  const message = (error as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : String(error);
}

function bounded(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > MAX_QUOTED ? `${oneLine.slice(0, MAX_QUOTED)}…` : oneLine;
}

/** Rejects with the abort reason as soon as `signal` fires, whatever `work` is doing. */
async function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason ?? new Error('aborted'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  work.catch(() => {}); // settles after the race is lost; nothing to report
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
