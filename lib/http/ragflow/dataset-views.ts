/**
 * Knowledge bases, documents and chunks in RAGFlow's field names (its `remap_dictionary_keys`,
 * `map_doc_keys` and the chunk routes' dicts): a dataset's `chunk_method`, `parser_config`,
 * `document_count`, `token_num`; a document's `run`, `dataset_id`, `chunk_count`; a chunk's
 * `content`, `document_id`, `docnm_kwd`. Times are epoch ms (`create_time`) and RFC 1123 text
 * (`create_date`), as RAGFlow answers them.
 */
import type { ChunkView, KnowledgeBase, KnowledgeDocument, RetrievedChunk } from '../../knowledge/types';
import { epochMs, httpDate } from './envelope';

/** RAGFlow's answer for a dataset's chunking: the naive chunker's settings Easel keeps. */
export function parserConfigOf(kb: KnowledgeBase): Record<string, unknown> {
  return kb.backend === 'local' ? { ...kb.local.chunking } : {};
}

export function datasetView(kb: KnowledgeBase, extra: { size?: number } = {}) {
  return {
    id: kb.id,
    name: kb.name,
    avatar: null,
    description: kb.description === '' ? null : kb.description,
    embedding_model: kb.backend === 'local' ? (kb.local.embedding_model ?? '') : '',
    permission: 'me',
    chunk_method: 'naive',
    parser_config: parserConfigOf(kb),
    pagerank: 0,
    language: 'English',
    similarity_threshold: 0.2,
    vector_similarity_weight: 0.3,
    document_count: kb.document_count,
    chunk_count: kb.chunk_count,
    token_num: kb.token_count,
    status: '1',
    tenant_id: kb.tenant,
    created_by: kb.tenant,
    create_time: epochMs(kb.created_at),
    create_date: httpDate(kb.created_at),
    update_time: epochMs(kb.updated_at),
    update_date: httpDate(kb.updated_at),
    ...(extra.size !== undefined ? { size: extra.size, connectors: [] } : {}),
  };
}

/** RAGFlow's `FileType` of a document, by its name: what its clients show and filter on. */
export function fileType(name: string, mimeType: string): string {
  const ext = suffixOf(name);
  if (ext === 'pdf') return 'pdf';
  if (mimeType.startsWith('image/') || /^(jpe?g|png|gif|bmp|tiff?|webp|svg|ico)$/.test(ext)) return 'visual';
  if (mimeType.startsWith('audio/') || /^(mp3|wav|flac|ogg|m4a|aac)$/.test(ext)) return 'aural';
  return 'doc';
}

export function suffixOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1).toLowerCase() : '';
}

export function documentRow(doc: KnowledgeDocument, kb: KnowledgeBase) {
  return {
    id: doc.id,
    name: doc.name,
    location: doc.name,
    dataset_id: doc.kb_id,
    knowledgebase_id: doc.kb_id,
    chunk_method: 'naive',
    parser_config: parserConfigOf(kb),
    source_type: 'local',
    type: fileType(doc.name, doc.mime_type),
    suffix: suffixOf(doc.name),
    created_by: kb.tenant,
    size: doc.size,
    token_count: doc.token_count,
    chunk_count: doc.chunk_count,
    progress: doc.progress,
    progress_msg: doc.progress_msg,
    process_begin_at: null,
    process_duration: 0,
    run: doc.status,
    status: '1',
    thumbnail: null,
    meta_fields: {},
    create_time: epochMs(doc.created_at),
    create_date: httpDate(doc.created_at),
    update_time: epochMs(doc.updated_at),
    update_date: httpDate(doc.updated_at),
  };
}

/** A chunk as `GET .../documents/{id}/chunks` lists it. */
export function chunkRow(chunk: ChunkView, docName: string) {
  return {
    id: chunk.id,
    content: chunk.content,
    document_id: chunk.document_id,
    docnm_kwd: docName,
    important_keywords: chunk.important_keywords,
    tag_kwd: [],
    questions: [],
    dataset_id: chunk.kb_id,
    image_id: '',
    doc_type_kwd: 'text',
    available: chunk.available,
    positions: [],
  };
}

/** A retrieved chunk with RAGFlow's retrieval route's renames (`chunk_id` -> `id`, ...). */
export function retrievedRow(chunk: RetrievedChunk) {
  const { chunk_id, content_with_weight, doc_id, important_kwd, docnm_kwd, kb_id, ...rest } = chunk;
  return { ...rest, id: chunk_id, content: content_with_weight, document_id: doc_id, important_keywords: important_kwd, questions: [], document_keyword: docnm_kwd, dataset_id: kb_id };
}
