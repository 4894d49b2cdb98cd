/**
 * Caps of the `local` knowledge backend: what one warm Lambda holds in memory and parses in one
 * request. Past them a knowledge base belongs on a RAGFlow server or in Bedrock Knowledge Bases.
 */

/**
 * Largest document one upload takes: 4 MiB. Lambda's synchronous payload is 6 MB, and API
 * Gateway hands a binary body to Lambda base64-encoded (4/3 larger): 4 MiB becomes ~5.6 MB,
 * which leaves room for the multipart envelope. The same figure as the file upload route.
 */
export const MAX_DOCUMENT_BYTES = 4 * 1024 * 1024;

/**
 * Most chunks one knowledge base holds: 20,000 (about 8 M tokens at RAGFlow's default 512
 * tokens per chunk, a few hundred books). The whole index of a knowledge base is loaded into
 * a warm process's memory to answer a query; at this size it stays within the index cache of a
 * 1 GB Lambda and loads in well under a second.
 */
export const MAX_CHUNKS_PER_KB = 20_000;

/** Most documents one knowledge base holds; listing and rebuilding stay cheap below it. */
export const MAX_DOCUMENTS_PER_KB = 2_000;

/** Most documents one `parse` call takes: they are parsed within the request. */
export const MAX_DOCUMENTS_PER_PARSE = 100;

/** Default bytes of deserialized indexes a warm process keeps (LRU). */
export const DEFAULT_INDEX_CACHE_BYTES = 256 * 1024 * 1024;
