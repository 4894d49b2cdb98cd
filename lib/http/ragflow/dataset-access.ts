/**
 * Who may use RAGFlow's dataset routes (admin keys: an end user's key is refused with code 103,
 * as on the other managing routes), and the dataset a path names: a missing one, another
 * tenant's and an id of no dataset's shape are refused with the same words, which are the
 * words of the RAGFlow route asked.
 */
import type { KnowledgeAdmin, KnowledgeBase, KnowledgeDocument } from '../../knowledge/types';
import { NotFoundError } from '../../store/errors';
import type { AppDeps } from '../app';
import { knowledgeOf } from '../knowledge';
import { adminOnly, type RagflowContext } from './context';
import { uuidHex } from './dataset-requests';
import { RAGFLOW, RagflowError } from './envelope';

export interface DatasetCaller {
  tenant: string;
  knowledge: KnowledgeAdmin;
}

export function datasetCaller(c: RagflowContext, deps: AppDeps): DatasetCaller {
  adminOnly(c);
  return { tenant: c.get('principal').tenant, knowledge: knowledgeOf(deps) };
}

/** RAGFlow's refusals of a dataset the caller does not own, by route. */
export const notOwned = {
  /** document and chunk routes */
  dataset: (id: string) => `You don't own the dataset ${id}.`,
  /** list and delete documents (RAGFlow's text ends with a space there) */
  documents: (id: string) => `You don't own the dataset ${id}. `,
  /** dataset routes */
  lacksPermission: (tenant: string, id: string) => `User '${tenant}' lacks permission for dataset '${id}'`,
  /** upload */
  upload: (id: string) => `Can't find the dataset with ID ${id}!`,
};

/** The caller's dataset `id` names, or code 102 with `refusal` (the id as sent in it). */
export async function ownedDataset(caller: DatasetCaller, id: string, refusal: string): Promise<KnowledgeBase> {
  const hex = uuidHex(id);
  if (!hex) throw new RagflowError(RAGFLOW.data, refusal);
  try {
    return await caller.knowledge.get(caller.tenant, hex);
  } catch (error) {
    if (error instanceof NotFoundError) throw new RagflowError(RAGFLOW.data, refusal);
    throw error;
  }
}

/** The document, or undefined when the dataset has none of that id. */
export async function documentOf(caller: DatasetCaller, kbId: string, docId: string): Promise<KnowledgeDocument | undefined> {
  if (!/^[0-9a-f]{32}$/.test(docId)) return undefined;
  try {
    return await caller.knowledge.getDocument(caller.tenant, kbId, docId);
  } catch (error) {
    if (error instanceof NotFoundError) return undefined;
    throw error;
  }
}

/** Every document of a knowledge base (the local backend keeps at most MAX_DOCUMENTS_PER_KB). */
export async function allDocuments(caller: DatasetCaller, kbId: string): Promise<KnowledgeDocument[]> {
  const all: KnowledgeDocument[] = [];
  for (let page = 1; ; page++) {
    const listed = await caller.knowledge.listDocuments(caller.tenant, kbId, { page, page_size: 100, orderby: 'create_time', desc: true });
    all.push(...listed.items);
    if (listed.items.length === 0 || all.length >= listed.total) return all;
  }
}
