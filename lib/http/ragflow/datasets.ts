/**
 * RAGFlow's datasets over Easel's knowledge bases (mounted at /api/v1/datasets): create, list,
 * get, update and delete, with the answers and messages of RAGFlow's `dataset_api.py`. A
 * dataset made here is a `local` knowledge base; knowledge bases of the other backends are
 * listed too (their `parser_config` is empty: they take no documents).
 */
import type { KnowledgeBase, ListOptions } from '../../knowledge/types';
import { NotFoundError } from '../../store/errors';
import { KnowledgeNameTakenError } from '../../store/knowledge';
import type { AppDeps } from '../app';
import { fieldError, ragflowArguments } from './arguments';
import { guardOf, param, type RagflowContext, routeGroup } from './context';
import { allDocuments, type DatasetCaller, datasetCaller, notOwned, ownedDataset } from './dataset-access';
import { CreateDatasetReq, datasetSettings, DeleteReq, deleteIds, requireJson, UpdateDatasetReq, uuidHex } from './dataset-requests';
import { datasetView } from './dataset-views';
import { jsonBody, ok, RAGFLOW, RagflowError } from './envelope';

/** RAGFlow's `REST_API_MAX_PAGE_SIZE` and `REST_API_MAX_IDS`. */
const MAX_PAGE_SIZE = 100;
const MAX_IDS = 100;
/** Names tried before a create gives up (RAGFlow tries up to 1000). */
const MAX_NAME_TRIES = 100;
const LIST_PARAMS = new Set(['id', 'ids', 'name', 'page', 'page_size', 'orderby', 'desc', 'include_parsing_status', 'ext']);

export function datasetRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);

  app.post('/', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    requireJson(c.req.header('content-type'));
    const req = ragflowArguments(CreateDatasetReq, await jsonBody(c));
    const settings = datasetSettings(req);
    // as RAGFlow: a name the tenant has already is made unique, "Manuals" -> "Manuals(1)"
    for (let name = req.name, tries = 0; ; name = nextName(name), tries++) {
      try {
        const kb = await caller.knowledge.create(caller.tenant, {
          name,
          backend: 'local',
          ...(settings.description !== undefined ? { description: settings.description } : {}),
          local: {
            // the service fills what is left out from DEFAULT_CHUNKING (NewKnowledgeBase types it whole)
            ...(settings.chunking ? { chunking: settings.chunking as Required<typeof settings.chunking> } : {}),
            ...(settings.embedding_model ? { embedding_model: settings.embedding_model } : {}),
          },
        });
        return ok(c, datasetView(kb));
      } catch (error) {
        if (!(error instanceof KnowledgeNameTakenError) || tries >= MAX_NAME_TRIES) throw error;
      }
    }
  }));

  app.get('/', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const args = listArgs(c);
    const { items, total } = await listDatasets(caller, args);
    const rows = [];
    for (const kb of items) rows.push({ ...datasetView(kb), ...(args.includeParsingStatus ? await parsingStatus(caller, kb) : {}) });
    return c.json({ code: 0, data: rows, total_datasets: total });
  }));

  app.delete('/', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    requireJson(c.req.header('content-type'));
    const req = ragflowArguments(DeleteReq, await jsonBody(c));
    let ids = deleteIds(req.ids);
    if (!ids || ids.length === 0) {
      if (!req.delete_all) return ok(c, { success_count: 0 });
      ids = (await everyDataset(caller)).map((kb) => kb.id);
    }
    const missing: string[] = [];
    for (const id of ids) {
      if (!(await exists(caller, id))) missing.push(id);
    }
    if (missing.length > 0) throw new RagflowError(RAGFLOW.data, `User '${caller.tenant}' lacks permission for datasets: '${missing.join(', ')}'`);
    for (const id of ids) await caller.knowledge.delete(caller.tenant, id);
    return ok(c, { success_count: ids.length });
  }));

  app.get('/:id', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    const kb = await ownedDataset(caller, id, notOwned.lacksPermission(caller.tenant, id));
    const size = (await allDocuments(caller, kb.id)).reduce((sum, d) => sum + d.size, 0);
    return ok(c, datasetView(kb, { size }));
  }));

  app.put('/:id', guard(async (c) => {
    const caller = datasetCaller(c, deps);
    const id = param(c, 'id');
    requireJson(c.req.header('content-type'));
    if (!uuidHex(id)) throw fieldError('dataset_id', 'Invalid UUID format', id);
    const req = ragflowArguments(UpdateDatasetReq, await jsonBody(c));
    if (Object.keys(req).length === 0) throw new RagflowError(RAGFLOW.data, 'no properties were modified');
    const kb = await ownedDataset(caller, id, notOwned.lacksPermission(caller.tenant, id));
    const settings = datasetSettings(req);
    const updated = await caller.knowledge.update(caller.tenant, kb.id, {
      ...(req.name !== undefined ? { name: req.name } : {}),
      ...(settings.description !== undefined ? { description: settings.description } : {}),
      ...(settings.chunking ? { chunking: settings.chunking } : {}),
      ...(settings.embedding_model ? { embedding_model: settings.embedding_model } : {}),
    }).catch((error: unknown) => {
      if (error instanceof KnowledgeNameTakenError && error.field === 'name') throw new RagflowError(RAGFLOW.data, `Dataset name '${req.name}' already exists`);
      throw error;
    });
    return ok(c, { ...datasetView(updated), connectors: [] });
  }));

  return app;
}

interface ListArgs extends Omit<ListOptions, 'id'> {
  id?: string;
  ids?: string[];
  includeParsingStatus: boolean;
}

/** The list query as RAGFlow's `ListDatasetReq` reads it (unknown parameters refused). */
function listArgs(c: RagflowContext): ListArgs {
  const queries = c.req.queries();
  const one = (name: string) => queries[name]?.[0];
  for (const name of Object.keys(queries)) if (!LIST_PARAMS.has(name)) throw fieldError(name, 'Extra inputs are not permitted', one(name));
  const int = (name: string, fallback: number) => {
    const raw = one(name);
    if (raw === undefined) return fallback;
    if (!/^[+-]?\d+$/.test(raw.trim())) throw fieldError(name, 'Input should be a valid integer, unable to parse string as an integer', raw);
    const n = Number(raw);
    if (n < 1) throw fieldError(name, 'Input should be greater than or equal to 1', raw);
    return n;
  };
  const flag = (name: string, fallback: boolean) => {
    const raw = one(name)?.trim().toLowerCase();
    if (raw === undefined) return fallback;
    if (['1', 'true', 't', 'yes', 'y', 'on'].includes(raw)) return true;
    if (['0', 'false', 'f', 'no', 'n', 'off'].includes(raw)) return false;
    throw fieldError(name, 'Input should be a valid boolean, unable to interpret input', one(name));
  };
  const page = int('page', 1);
  const pageSize = int('page_size', 30);
  if (pageSize > MAX_PAGE_SIZE) throw fieldError('page_size', `Value error, page_size must be less than or equal to ${MAX_PAGE_SIZE}`, one('page_size'));
  const orderby = one('orderby') ?? 'create_time';
  if (orderby !== 'create_time' && orderby !== 'update_time') throw fieldError('orderby', "Input should be 'create_time' or 'update_time'", orderby);
  const uuid = (name: string, raw: string) => {
    const hex = uuidHex(raw);
    if (!hex) throw fieldError(name, 'Invalid UUID format', raw);
    return hex;
  };
  const rawId = one('id');
  const ids = queries.ids?.flatMap((v) => v.split(',')).filter((v) => v !== '');
  if (ids && ids.length > MAX_IDS) throw fieldError('ids', `List should have at most ${MAX_IDS} items after validation`, ids);
  const name = one('name');
  return {
    page,
    page_size: pageSize,
    orderby,
    desc: flag('desc', true),
    includeParsingStatus: flag('include_parsing_status', false),
    ...(rawId !== undefined && rawId !== '' ? { id: uuid('id', rawId) } : {}),
    ...(ids && ids.length > 0 ? { ids: ids.map((v) => uuid('ids', v)) } : {}),
    ...(name ? { name } : {}),
  };
}

async function listDatasets(caller: DatasetCaller, args: ListArgs): Promise<{ items: KnowledgeBase[]; total: number }> {
  const { knowledge, tenant } = caller;
  if (args.id && args.ids) throw new RagflowError(RAGFLOW.data, `Should not provide both 'id':${args.id} and 'ids'${pythonList(args.ids)}`);
  if (args.id && !(await exists(caller, args.id))) throw new RagflowError(RAGFLOW.data, notOwned.lacksPermission(tenant, args.id));
  const options: ListOptions = { page: args.page, page_size: args.page_size, orderby: args.orderby, desc: args.desc, ...(args.id ? { id: args.id } : {}), ...(args.name ? { name: args.name } : {}) };
  if (args.name && (await knowledge.list(tenant, { ...options, page: 1, page_size: 1 })).total === 0) {
    throw new RagflowError(RAGFLOW.data, notOwned.lacksPermission(tenant, args.name));
  }
  if (!args.ids) return knowledge.list(tenant, options);
  // the ids the caller owns, ordered and paged as the listing would
  const owned = (await everyDataset(caller, options)).filter((kb) => args.ids?.includes(kb.id));
  return { items: owned.slice((args.page - 1) * args.page_size, args.page * args.page_size), total: owned.length };
}

/** Every knowledge base of the tenant (in the order `options` asks), page by page. */
async function everyDataset(caller: DatasetCaller, options: Partial<ListOptions> = {}): Promise<KnowledgeBase[]> {
  const all: KnowledgeBase[] = [];
  for (let page = 1; ; page++) {
    const listed = await caller.knowledge.list(caller.tenant, { orderby: 'create_time', desc: true, ...options, page, page_size: MAX_PAGE_SIZE });
    all.push(...listed.items);
    if (listed.items.length === 0 || all.length >= listed.total) return all;
  }
}

async function exists(caller: DatasetCaller, id: string): Promise<boolean> {
  try {
    await caller.knowledge.get(caller.tenant, id);
    return true;
  } catch (error) {
    if (error instanceof NotFoundError) return false;
    throw error;
  }
}

/** RAGFlow's `duplicate_name`: `a` -> `a(1)`, `a(1)` -> `a(2)`, `a.v2` -> `a(1).v2`. */
function nextName(name: string): string {
  const dot = name.lastIndexOf('.');
  const [stem, suffix] = dot > 0 && dot < name.length - 1 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  const counted = /^(.*)\((\d+)\)$/.exec(stem);
  return counted ? `${counted[1]}(${Number(counted[2]) + 1})${suffix}` : `${stem}(1)${suffix}`;
}

/** `include_parsing_status`: the dataset's documents by `run` status. */
async function parsingStatus(caller: DatasetCaller, kb: KnowledgeBase): Promise<Record<string, number>> {
  const counts = { unstart_count: 0, running_count: 0, cancel_count: 0, done_count: 0, fail_count: 0 };
  const key = { UNSTART: 'unstart_count', RUNNING: 'running_count', CANCEL: 'cancel_count', DONE: 'done_count', FAIL: 'fail_count' } as const;
  for (const doc of await allDocuments(caller, kb.id)) counts[key[doc.status]]++;
  return counts;
}

function pythonList(values: readonly string[]): string {
  return `[${values.map((v) => `'${v}'`).join(', ')}]`;
}
