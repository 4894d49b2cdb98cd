/**
 * A dataset's documents (mounted at /api/v1/datasets/{id}/documents): upload (multipart `file`
 * parts, stored `UNSTART` as RAGFlow stores them; parsing is `POST .../chunks`), list with the
 * parse status RAGFlow's SDK polls (`run`, `progress`, `progress_msg`, `chunk_count`), and
 * delete. Answers and messages follow RAGFlow's `document_api.py`. Updating and downloading a
 * document are not served (the catch-all answers them as unsupported).
 */
import type { KnowledgeDocument, NewDocument } from '../../knowledge/types';
import type { AppDeps } from '../app';
import { fileParts, MAX_DOCUMENT_NAME_BYTES, maxDocumentBytes, uploadAll } from '../knowledge';
import { ragflowArguments } from './arguments';
import { guardOf, pageOf, param, type RagflowContext, routeGroup } from './context';
import { allDocuments, type DatasetCaller, datasetCaller, documentOf, notOwned, ownedDataset } from './dataset-access';
import { DeleteReq, deleteIds, requireJson } from './dataset-requests';
import { documentRow, suffixOf } from './dataset-views';
import { jsonBody, ok, RAGFLOW, RagflowError, success } from './envelope';

const RUN_STATUSES = ['UNSTART', 'RUNNING', 'CANCEL', 'DONE', 'FAIL'] as const;
/** Filters of RAGFlow's document listing that Easel does not keep the data for. */
const UNSUPPORTED_FILTERS = ['types', 'metadata_condition', 'metadata', 'return_empty_metadata'];

export function documentRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);

  app.post('/', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    const kb = await ownedDataset(caller, id, notOwned.upload(id));
    const type = (c.req.query('type') || 'local').toLowerCase();
    if (type === 'web' || type === 'empty') throw new RagflowError(RAGFLOW.argument, `\`type=${type}\` is not supported by Easel: upload files (\`type=local\`).`);
    if (type !== 'local') throw new RagflowError(RAGFLOW.argument, '`type` must be one of "local", "web", or "empty".');
    const form = await c.req.parseBody({ all: true }).catch(() => {
      throw new RagflowError(RAGFLOW.argument, 'No file part!');
    });
    const parts = fileParts(form);
    if (parts.length === 0) throw new RagflowError(RAGFLOW.argument, 'No file part!');
    const max = maxDocumentBytes(deps);
    const docs: NewDocument[] = [];
    for (const part of parts) {
      if (!(part instanceof File) || part.name === '') throw new RagflowError(RAGFLOW.argument, 'No file selected!');
      if (Buffer.byteLength(part.name, 'utf8') > MAX_DOCUMENT_NAME_BYTES) throw new RagflowError(RAGFLOW.argument, `File name must be ${MAX_DOCUMENT_NAME_BYTES} bytes or less.`);
      if (part.size > max) throw new RagflowError(RAGFLOW.argument, `${part.name} is ${part.size} bytes; a document is at most ${max} bytes.`);
      docs.push({ name: part.name, mime_type: (part.type || 'application/octet-stream').split(';')[0]?.trim() || 'application/octet-stream', bytes: new Uint8Array(await part.arrayBuffer()) });
    }
    const stored = await uploadAll(caller.knowledge, caller.tenant, kb.id, docs);
    return ok(c, stored.map((d) => documentRow(d, kb)));
  }));

  app.get('/', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    const kb = await ownedDataset(caller, id, notOwned.documents(id));
    const { total, docs } = await listDocuments(c, caller, kb.id);
    return success(c, { total, docs: docs.map((d) => documentRow(d, kb)) });
  }));

  app.delete('/', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    requireJson(c.req.header('content-type'));
    const req = ragflowArguments(DeleteReq, await jsonBody(c));
    // documents keep RAGFlow's own ids: any text, only repeats are refused
    let ids = deleteIds(req.ids, 'ids', false) ?? [];
    const kb = await ownedDataset(caller, id, notOwned.documents(id));
    if (!req.delete_all && ids.length === 0) throw new RagflowError(RAGFLOW.data, `should either provide doc ids or set delete_all(true), dataset: ${id}. `);
    if (ids.length > 0 && req.delete_all) throw new RagflowError(RAGFLOW.data, `should not provide both doc ids and delete_all(true), dataset: ${id}. `);
    if (req.delete_all) ids = (await allDocuments(caller, kb.id)).map((d) => d.id);
    const invalid: string[] = [];
    for (const docId of ids) if (!(await documentOf(caller, kb.id, docId))) invalid.push(docId);
    if (invalid.length > 0) throw new RagflowError(RAGFLOW.data, `These documents do not belong to dataset ${id} or Document not found: ${invalid.join(', ')}`);
    if (ids.length > 0) await caller.knowledge.deleteDocuments(caller.tenant, kb.id, ids);
    return ok(c, { deleted: ids.length });
  }));

  return app;
}

/**
 * RAGFlow's listing filters: `id` (that document alone), `ids`, `name`, `keywords` (in the
 * name), `run` (numbers or names), `suffix`, `orderby` (`create_time`, `update_time`), `desc`,
 * `page`, `page_size`, and `create_time_from` / `create_time_to` (applied to the page, as RAGFlow
 * applies them; 0 is no bound).
 */
async function listDocuments(c: RagflowContext, caller: DatasetCaller, kbId: string): Promise<{ total: number; docs: KnowledgeDocument[] }> {
  const queries = c.req.queries();
  const q = c.req.query();
  for (const name of UNSUPPORTED_FILTERS) {
    if (queries[name]?.some((v) => v !== '')) throw new RagflowError(RAGFLOW.argument, `The document filter \`${name}\` is not supported by Easel.`);
  }
  const { page, size } = pageOf(q);
  const orderby = q.orderby ?? 'create_time';
  if (orderby === 'name') throw new RagflowError(RAGFLOW.argument, 'orderby=name is not supported by Easel: order by create_time or update_time.');
  if (orderby !== 'create_time' && orderby !== 'update_time') throw new RagflowError(RAGFLOW.argument, `invalid orderby field: ${orderby}`);
  const desc = String(q.desc ?? 'true').trim().toLowerCase() !== 'false';
  const runs = runFilter(queries);
  const suffixes = (queries.suffix ?? []).map((s) => s.trim().toLowerCase().replace(/^\./, '')).filter((s) => s !== '');
  const bound = (name: string) => {
    const raw = q[name];
    if (raw === undefined || raw === '') return 0;
    if (!/^\d+$/.test(raw)) throw new RagflowError(RAGFLOW.argument, `${name} must be a Unix timestamp (ms), or 0 for no bound.`);
    return Number(raw);
  };
  const [from, to] = [bound('create_time_from'), bound('create_time_to')];

  const ids = (queries.ids ?? []).flatMap((v) => v.split(',')).filter((v) => v !== '');
  if (q.id) {
    const doc = await documentOf(caller, kbId, q.id);
    if (!doc) throw new RagflowError(RAGFLOW.data, `you don't own the document ${q.id}`);
    if (ids.length > 0) throw new RagflowError(RAGFLOW.data, `Should not provide both 'id':${q.id} and 'ids'[${ids.map((i) => `'${i}'`).join(', ')}]`);
    return { total: 1, docs: [doc] };
  }
  const base = { orderby, desc, ...(q.name ? { name: q.name } : {}), ...(q.keywords ? { keywords: q.keywords } : {}) } as const;
  if (q.name && (await caller.knowledge.listDocuments(caller.tenant, kbId, { ...base, page: 1, page_size: 1 })).total === 0) {
    throw new RagflowError(RAGFLOW.data, `you don't own the document ${q.name}`);
  }
  let total: number;
  let docs: KnowledgeDocument[];
  if (ids.length > 0 || runs || suffixes.length > 0) {
    // filters the service does not page by: the whole listing, filtered and paged here
    const all = (await allDocuments(caller, kbId)).filter((d) =>
      (ids.length === 0 || ids.includes(d.id)) &&
      (!runs || runs.has(d.status)) &&
      (suffixes.length === 0 || suffixes.includes(suffixOf(d.name))) &&
      (!q.name || d.name === q.name) &&
      (!q.keywords || d.name.toLowerCase().includes(q.keywords.toLowerCase())));
    const key = orderby === 'create_time' ? 'created_at' : 'updated_at';
    all.sort((a, b) => (desc ? b[key].localeCompare(a[key]) : a[key].localeCompare(b[key])));
    total = all.length;
    docs = all.slice((page - 1) * size, page * size);
  } else {
    const listed = await caller.knowledge.listDocuments(caller.tenant, kbId, { ...base, page, page_size: size });
    total = listed.total;
    docs = listed.items;
  }
  if (from || to) docs = docs.filter((d) => (from === 0 || Date.parse(d.created_at) >= from) && (to === 0 || Date.parse(d.created_at) <= to));
  return { total, docs };
}

/** `run` (or `run_status`) filters: RAGFlow's numbers 0-4 or its names, several allowed. */
function runFilter(queries: Record<string, string[]>): Set<string> | undefined {
  const values = ['run', 'run_status', 'run[]', 'run_status[]'].flatMap((name) => queries[name] ?? []).flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== '');
  if (values.length === 0) return undefined;
  const statuses = new Set<string>();
  const invalid: string[] = [];
  for (const value of values) {
    const byNumber = /^[0-4]$/.test(value) ? RUN_STATUSES[Number(value)] : undefined;
    const byName = RUN_STATUSES.find((s) => s === value.toUpperCase());
    const status = byNumber ?? byName;
    if (status) statuses.add(status);
    else invalid.push(value);
  }
  if (invalid.length > 0) throw new RagflowError(RAGFLOW.data, `Invalid filter run status conditions: ${invalid.join(', ')}`);
  return statuses;
}
