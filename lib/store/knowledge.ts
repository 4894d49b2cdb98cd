/**
 * Knowledge bases of a tenant: one partition each (`T#<tenant>#KB#<id>`), its item `KB` holding
 * the settings, the counts and the pointer to its current index. Names are unique in the tenant
 * whatever their case, and aliases unique as they are, each through an item of its own written
 * in the same transaction as the knowledge base (`KBN#<name>`, `KBA#<alias>`); gsi1 lists a
 * tenant's knowledge bases. Nothing here expires: knowledge lives as long as its knowledge base.
 *
 * Documents, chunks and the index are in knowledge-documents.ts and knowledge-index.ts.
 */
import { GetCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { EaselError } from '../errors';
import type { KnowledgeBase } from '../knowledge/types';
import { batchGetItems, call, ConditionFailed, queryAll, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { KNOWLEDGE_BASE_SK, keys } from './item-keys';
import { deleteKeys, deletePartition } from './partitions';
import { LISTING_INDEX } from './table';

/** Where a knowledge base's current index is: its blob, and the documents' version it was built from. */
export interface IndexPointer {
  hash: string;
  /** The `docsVersion` the index reflects. */
  version: number;
  /** Serialized size (characters). */
  bytes: number;
  chunks: number;
  /** ISO 8601. */
  builtAt: string;
}

/** A knowledge base as stored: what clients see, and the state its index is kept by. */
export interface StoredKnowledgeBase {
  kb: KnowledgeBase;
  /** Goes up with every change to its chunks (a parse finished, a document deleted). */
  docsVersion: number;
  index?: IndexPointer;
}

/** The name or an alias is another knowledge base's already. */
export class KnowledgeNameTakenError extends EaselError {
  constructor(
    readonly field: 'name' | 'aliases',
    readonly value: string,
  ) {
    super('invalid_request', field === 'name'
      ? `name: a knowledge base named "${value}" exists already`
      : `aliases: "${value}" is another knowledge base's alias already`);
  }
}

/** How a name is made unique: case and Unicode form do not tell two names apart. */
export function nameKey(name: string): string {
  return name.normalize('NFC').trim().toLowerCase();
}

const KB_KIND = 'knowledge_base';

export async function createKnowledgeBase(ctx: StoreContext, kb: KnowledgeBase): Promise<void> {
  const uniques = uniqueItems(kb.tenant, kb.id, kb.name, kb.aliases);
  try {
    await call('create the knowledge base', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: ctx.table, Item: { ...toItem(kb), docs_version: 0 }, ConditionExpression: 'attribute_not_exists(pk)' } },
          ...uniques.map((u) => ({ Put: { TableName: ctx.table, Item: u.item, ConditionExpression: 'attribute_not_exists(pk)' } })),
        ],
      })),
    );
  } catch (error) {
    if (error instanceof ConditionFailed && error.index !== undefined && error.index > 0) {
      const taken = uniques[error.index - 1];
      if (taken) throw new KnowledgeNameTakenError(taken.field, taken.value);
    }
    if (error instanceof ConditionFailed) throw new EaselError('invalid_request', `id: a knowledge base with id ${kb.id} exists already`);
    throw error;
  }
}

/** The knowledge base, or NotFoundError (also for another tenant's, and one being deleted). */
export async function getKnowledgeBase(ctx: StoreContext, tenant: string, id: string): Promise<StoredKnowledgeBase> {
  const { Item } = await call('read the knowledge base', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.knowledgeBase(tenant, id), sk: KNOWLEDGE_BASE_SK }, ConsistentRead: true })),
  );
  if (!Item || Item.deleting) throw new NotFoundError('knowledge base');
  return fromItem(Item);
}

/** Every knowledge base of the tenant, oldest first (a tenant has tens, not thousands). */
export async function listKnowledgeBases(ctx: StoreContext, tenant: string): Promise<StoredKnowledgeBase[]> {
  const listed = await queryAll(ctx, 'list the knowledge bases', {
    IndexName: LISTING_INDEX,
    KeyConditionExpression: 'gsi1pk = :pk',
    ExpressionAttributeValues: { ':pk': keys.knowledgeList(tenant) },
  });
  const items = await batchGet(ctx, listed.map((i) => ({ pk: keys.knowledgeBase(tenant, i.id as string), sk: KNOWLEDGE_BASE_SK })));
  const byId = new Map(items.filter((i) => !i.deleting).map((i) => [i.id as string, fromItem(i)]));
  return listed.map((i) => byId.get(i.id as string)).filter((kb): kb is StoredKnowledgeBase => kb !== undefined);
}

/**
 * The knowledge bases that ids, aliases or names stand for, in that order of precedence, in the
 * order asked and each once; what names none of the tenant's is `missing`.
 */
export async function resolveKnowledgeBases(ctx: StoreContext, tenant: string, refs: readonly string[]): Promise<{ found: StoredKnowledgeBase[]; missing: string[] }> {
  const wanted = [...new Set(refs.map((r) => r.trim()).filter((r) => r !== ''))];
  const direct = wanted.map((r) => ({ pk: keys.knowledgeBase(tenant, r), sk: KNOWLEDGE_BASE_SK }));
  const aliases = wanted.map((r) => ({ pk: keys.knowledgeAlias(tenant, r), sk: 'A' }));
  const names = wanted.filter((r) => nameKey(r) !== '').map((r) => ({ pk: keys.knowledgeName(tenant, nameKey(r)), sk: 'N' }));
  const first = await batchGet(ctx, [...direct, ...aliases, ...names]);
  const byPk = new Map(first.map((i) => [i.pk as string, i]));
  const idOf = new Map<string, string>();
  for (const r of wanted) {
    const kb = byPk.get(keys.knowledgeBase(tenant, r));
    const target = kb && !kb.deleting
      ? r
      : ((byPk.get(keys.knowledgeAlias(tenant, r))?.kb_id ?? byPk.get(keys.knowledgeName(tenant, nameKey(r)))?.kb_id) as string | undefined);
    if (target) idOf.set(r, target);
  }
  const toFetch = [...new Set(idOf.values())].filter((id) => !byPk.has(keys.knowledgeBase(tenant, id)));
  for (const item of await batchGet(ctx, toFetch.map((id) => ({ pk: keys.knowledgeBase(tenant, id), sk: KNOWLEDGE_BASE_SK })))) byPk.set(item.pk as string, item);
  const found: StoredKnowledgeBase[] = [];
  const missing: string[] = [];
  const seen = new Set<string>();
  for (const r of refs) {
    const id = idOf.get(r.trim());
    const item = id ? byPk.get(keys.knowledgeBase(tenant, id)) : undefined;
    if (!item || item.deleting) {
      if (!missing.includes(r)) missing.push(r);
      continue;
    }
    if (seen.has(id as string)) continue;
    seen.add(id as string);
    found.push(fromItem(item));
  }
  return { found, missing };
}

export interface KnowledgeBaseChange {
  name?: string;
  description?: string;
  aliases?: string[];
  /** The backend's settings object, whole. */
  settings?: Record<string, unknown>;
}

/**
 * Changes a knowledge base, moving its name and alias items with it in one transaction;
 * `expect` is the knowledge base as the caller read it (a concurrent rename fails the write).
 */
export async function updateKnowledgeBase(ctx: StoreContext, expect: KnowledgeBase, change: KnowledgeBaseChange, at: string): Promise<void> {
  const { tenant, id } = expect;
  const names: Record<string, string> = { '#u': 'updated_at', '#n': 'name' };
  const values: Record<string, unknown> = { ':u': at, ':oldName': expect.name };
  const sets = ['#u = :u'];
  if (change.name !== undefined) {
    sets.push('#n = :n', 'name_key = :nk');
    values[':n'] = change.name;
    values[':nk'] = nameKey(change.name);
  }
  if (change.description !== undefined) {
    sets.push('description = :d');
    values[':d'] = change.description;
  }
  if (change.aliases !== undefined) {
    sets.push('aliases = :a');
    values[':a'] = change.aliases;
  }
  if (change.settings !== undefined) {
    sets.push('settings = :s');
    values[':s'] = change.settings;
  }
  type Action = { action: Record<string, unknown>; field?: 'name' | 'aliases'; value?: string };
  const actions: Action[] = [{
    action: {
      Update: {
        TableName: ctx.table,
        Key: { pk: keys.knowledgeBase(tenant, id), sk: KNOWLEDGE_BASE_SK },
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(deleting) AND #n = :oldName',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      },
    },
  }];
  const owned = { ConditionExpression: 'kb_id = :id', ExpressionAttributeValues: { ':id': id } };
  if (change.name !== undefined && nameKey(change.name) !== nameKey(expect.name)) {
    actions.push({ action: { Delete: { TableName: ctx.table, Key: { pk: keys.knowledgeName(tenant, nameKey(expect.name)), sk: 'N' }, ...owned } } });
    actions.push({ action: { Put: { TableName: ctx.table, Item: nameItem(tenant, id, change.name), ConditionExpression: 'attribute_not_exists(pk)' } }, field: 'name', value: change.name });
  }
  if (change.aliases !== undefined) {
    const before = new Set(expect.aliases);
    const after = new Set(change.aliases);
    for (const alias of before) {
      if (!after.has(alias)) actions.push({ action: { Delete: { TableName: ctx.table, Key: { pk: keys.knowledgeAlias(tenant, alias), sk: 'A' }, ...owned } } });
    }
    for (const alias of after) {
      if (!before.has(alias)) actions.push({ action: { Put: { TableName: ctx.table, Item: aliasItem(tenant, id, alias), ConditionExpression: 'attribute_not_exists(pk)' } }, field: 'aliases', value: alias });
    }
  }
  try {
    await call('update the knowledge base', () => ctx.doc.send(new TransactWriteCommand({ TransactItems: actions.map((a) => a.action) as never })));
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const failed = error.index !== undefined ? actions[error.index] : undefined;
    if (failed?.field && failed.value !== undefined) throw new KnowledgeNameTakenError(failed.field, failed.value);
    // deleted, or renamed meanwhile: the caller reads it again
    throw new KnowledgeBaseChangedError();
  }
}

/** The knowledge base changed (or went) between the caller's read and its write. */
export class KnowledgeBaseChangedError extends Error {
  constructor() {
    super('the knowledge base changed meanwhile');
  }
}

/**
 * Deletes a knowledge base with everything in its partition and its name and alias items. It is
 * marked first, so it is gone for every reader at once and every parse still writing into it
 * fails its commit; a deletion cut short is finished by deleting again (or, once the item is
 * gone, by the stream cleanup: lib/store/cleanup.ts). NotFoundError when there is none.
 */
export async function deleteKnowledgeBase(ctx: StoreContext, tenant: string, id: string): Promise<void> {
  const pk = keys.knowledgeBase(tenant, id);
  let item: Record<string, unknown>;
  try {
    const out = await call('delete the knowledge base', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk, sk: KNOWLEDGE_BASE_SK },
        UpdateExpression: 'SET deleting = :t REMOVE gsi1pk, gsi1sk',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeValues: { ':t': true },
        ReturnValues: 'ALL_NEW',
      })),
    );
    item = out.Attributes ?? {};
  } catch (error) {
    if (error instanceof ConditionFailed) throw new NotFoundError('knowledge base');
    throw error;
  }
  const rest = await queryAll(ctx, 'list the knowledge base items', {
    KeyConditionExpression: 'pk = :pk',
    ExpressionAttributeValues: { ':pk': pk },
    ProjectionExpression: 'pk, sk',
  });
  await deleteKeys(ctx, rest.filter((i) => i.sk !== KNOWLEDGE_BASE_SK).map((i) => ({ pk, sk: i.sk as string })));
  const aliases = Array.isArray(item.aliases) ? (item.aliases as string[]) : [];
  const owned = { ConditionExpression: 'attribute_not_exists(pk) OR kb_id = :id', ExpressionAttributeValues: { ':id': id } };
  await call('delete the knowledge base', () =>
    ctx.doc.send(new TransactWriteCommand({
      TransactItems: [
        { Delete: { TableName: ctx.table, Key: { pk, sk: KNOWLEDGE_BASE_SK } } },
        { Delete: { TableName: ctx.table, Key: { pk: keys.knowledgeName(tenant, item.name_key as string), sk: 'N' }, ...owned } },
        ...aliases.map((alias) => ({ Delete: { TableName: ctx.table, Key: { pk: keys.knowledgeAlias(tenant, alias), sk: 'A' }, ...owned } })),
      ],
    })),
  );
  // a parse that wrote chunks between the sweep and now leaves them: they go with the partition
  await deletePartition(ctx, pk);
}

function uniqueItems(tenant: string, id: string, name: string, aliases: readonly string[]): { field: 'name' | 'aliases'; value: string; item: Record<string, unknown> }[] {
  return [
    { field: 'name' as const, value: name, item: nameItem(tenant, id, name) },
    ...aliases.map((alias) => ({ field: 'aliases' as const, value: alias, item: aliasItem(tenant, id, alias) })),
  ];
}

function nameItem(tenant: string, id: string, name: string): Record<string, unknown> {
  return { pk: keys.knowledgeName(tenant, nameKey(name)), sk: 'N', kind: 'knowledge_name', kb_id: id };
}

function aliasItem(tenant: string, id: string, alias: string): Record<string, unknown> {
  return { pk: keys.knowledgeAlias(tenant, alias), sk: 'A', kind: 'knowledge_alias', kb_id: id };
}

function toItem(kb: KnowledgeBase): Record<string, unknown> {
  return {
    pk: keys.knowledgeBase(kb.tenant, kb.id),
    sk: KNOWLEDGE_BASE_SK,
    kind: KB_KIND,
    id: kb.id,
    tenant: kb.tenant,
    name: kb.name,
    name_key: nameKey(kb.name),
    description: kb.description,
    aliases: kb.aliases,
    backend: kb.backend,
    settings: settingsOf(kb),
    document_count: kb.document_count,
    chunk_count: kb.chunk_count,
    token_count: kb.token_count,
    created_at: kb.created_at,
    updated_at: kb.updated_at,
    gsi1pk: keys.knowledgeList(kb.tenant),
    gsi1sk: `${kb.created_at}#${kb.id}`,
  };
}

function settingsOf(kb: KnowledgeBase): Record<string, unknown> {
  switch (kb.backend) {
    case 'local':
      return { ...kb.local };
    case 'ragflow':
      return { ...kb.ragflow };
    case 'bedrock':
      return { ...kb.bedrock };
  }
}

export function fromItem(item: Record<string, unknown>): StoredKnowledgeBase {
  const common = {
    id: item.id as string,
    tenant: item.tenant as string,
    name: item.name as string,
    description: (item.description as string | undefined) ?? '',
    aliases: (item.aliases as string[] | undefined) ?? [],
    document_count: (item.document_count as number | undefined) ?? 0,
    chunk_count: (item.chunk_count as number | undefined) ?? 0,
    token_count: (item.token_count as number | undefined) ?? 0,
    created_at: item.created_at as string,
    updated_at: item.updated_at as string,
  };
  const settings = (item.settings ?? {}) as never;
  const backend = item.backend as KnowledgeBase['backend'];
  const kb: KnowledgeBase = backend === 'ragflow'
    ? { ...common, backend, ragflow: settings }
    : backend === 'bedrock'
      ? { ...common, backend, bedrock: settings }
      : { ...common, backend: 'local', local: settings };
  const index: IndexPointer | undefined = typeof item.index_hash === 'string'
    ? {
        hash: item.index_hash,
        version: item.index_version as number,
        bytes: (item.index_bytes as number | undefined) ?? 0,
        chunks: (item.index_chunks as number | undefined) ?? 0,
        builtAt: (item.index_at as string | undefined) ?? '',
      }
    : undefined;
  return { kb, docsVersion: (item.docs_version as number | undefined) ?? 0, ...(index ? { index } : {}) };
}

export function batchGet(ctx: StoreContext, keysToGet: { pk: string; sk: string }[]): Promise<Record<string, unknown>[]> {
  return batchGetItems(ctx, 'read the knowledge bases', keysToGet);
}
