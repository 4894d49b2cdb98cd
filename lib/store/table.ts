/**
 * The single table, defined once in table.json: serverless.yml's CloudFormation resource
 * reads the same file (`${file(./lib/store/table.json)}`), and the local launcher creates the
 * table from it. Key layout (every partition key starts with the tenant):
 *
 *   T#<tenant>                  KEY#<key id>        API key (hashed secret, scopes)
 *   T#<tenant>#W#<workflow>     W | V#<version>     workflow head, immutable versions
 *   T#<tenant>#S#<session>      T#<turn> | T#~      turn records (or the claim of the turn in flight),
 *                                                   the session head (last)
 *                               B#<sha256>[#<i>]    content-addressed blobs of the session
 *   T#<tenant>#I#<key>          I                   idempotency record
 *   T#<tenant>#Q#<scope>        D#<day>             quota usage of a tenant shard, end user or key (TTL)
 *   T#<tenant>#QR#<scope>       M#<minute>          runs started by a key or client address (TTL)
 *   T#<tenant>#KB#<kb>          KB                  knowledge base: settings, counts, index pointer
 *                               D#<doc> | R#<doc>#<i>   documents and their bytes
 *                               C#<doc>#<run>#<i>   chunks of a document's parse run
 *                               B#<sha256>[#<i>]    the serialized index
 *   T#<tenant>#KBN#<name>       N                   a knowledge base's name (lower case), unique
 *   T#<tenant>#KBA#<alias>      A                   a knowledge base's alias, unique
 *   T#<tenant>#MCP              S#<id> | N#<name>   MCP servers, their names (unique), their count
 *                               COUNT
 *
 * gsi1 lists workflows per tenant, sessions per workflow and knowledge bases per tenant without reading their state; the
 * sparse `timers` index holds the heads of runs whose form timer is armed, by due time.
 */
import definition from './table.json';

export const TABLE_DEFINITION = definition;
export const LISTING_INDEX = 'gsi1';
/** Sparse: only heads of runs waiting with an armed timer carry its keys (`DUE`, due time). */
export const TIMER_INDEX = 'timers';
export const TTL_ATTRIBUTE = 'ttl';
