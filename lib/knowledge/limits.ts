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
 * Most chunks one knowledge base holds: 10,000 (about 4 M tokens at ~400 tokens a chunk, some
 * 10,000 pages). Every parse rebuilds the whole index in its request, and every warm process
 * that searches holds the whole of it. Measured with bench/knowledge-local.ts (chunks of ~300
 * words; CPU time on a shared 2-core machine):
 *
 *   chunks  vectors  build+serialize  brotli  blob    load    heap     query p50 / p95
 *   10,000  none     13.2 s           2.8 s   11 MB   1.3 s   ~120 MB  28 / 56 ms
 *   10,000  1024     16.0 s           5.5 s   49 MB   2.1 s   ~160 MB  86 / 123 ms
 *   20,000  none     22.9 s           5.6 s   22 MB   2.5 s   ~120 MB  63 / 117 ms
 *   20,000  1024     31.6 s          10.5 s   99 MB   3.6 s   ~300 MB  148 / 241 ms
 *
 * At 20,000 a rebuild alone passes the 30 s an API Gateway request may take, and a query's p95
 * passes 100 ms; at 10,000 both stay within, with the heap of a 1 GB Lambda to spare.
 */
export const MAX_CHUNKS_PER_KB = 10_000;

/** Most documents one knowledge base holds; listing and rebuilding stay cheap below it. */
export const MAX_DOCUMENTS_PER_KB = 2_000;

/** Most documents one `parse` call takes: they are parsed within the request. */
export const MAX_DOCUMENTS_PER_PARSE = 100;

/** Default bytes of deserialized indexes a warm process keeps (LRU). */
export const DEFAULT_INDEX_CACHE_BYTES = 256 * 1024 * 1024;
