/**
 * Quotas (off unless configured): turns per minute and model tokens per day, per tenant and per
 * end user (or per execute key when no end user is asserted: `quotaSubject`), and how many runs
 * one execute key alone, and one client address, may start a minute.
 *
 * Where they sit in a turn (execute.ts):
 * - The turn's counters are read in one BatchGetItem started beside the session's load (no added
 *   latency) and judged once the turn is known not to be a replay: a turn starting when a budget
 *   is spent is refused (`RateLimitedError`, 429). A stop is never refused.
 * - A first turn on an execute key alone then takes a run start (a conditional increment per
 *   client address, then per key): refused past the limit, exact under concurrency.
 * - After the commit, the turn and its tokens (the sum of its model call records' usage) are
 *   added to one random shard of the tenant and to its subject: the turn that crosses a token
 *   budget completes, so a budget may be overshot by one turn (by the turns in flight at once).
 *   Replays commit nothing and count nothing. A failed count is dropped, never the turn.
 *
 * Windows are fixed UTC minutes and days (a client may get up to twice a minute's limit across
 * a minute's boundary). Counts are read eventually consistent: a turn that follows another by a
 * few milliseconds may not see its count yet. Turns nobody sent (timers, queued messages) count
 * on the tenant only.
 */
import { createHash } from 'node:crypto';
import { EaselError } from '../errors';
import { parseIp } from '../outbound/ip';
import type { StoreContext } from '../store/dynamo';
import { addUsage, readUsage, takeRunStart, type Usage, type UsageKey } from '../store/quotas';
import { type Actor, quotaSubject } from './actors';

/** Limits; an absent or 0 limit is no limit. */
export interface QuotaLimits {
  tenantTurnsPerMinute?: number;
  tenantTokensPerDay?: number;
  /** Per end user, or per execute key when no end user is asserted. */
  userTurnsPerMinute?: number;
  userTokensPerDay?: number;
  /** Runs one execute key alone (no end user) may start a minute. */
  runsPerKeyPerMinute?: number;
  /** Runs one client address may start a minute with an execute key alone. */
  runsPerAddressPerMinute?: number;
}

export interface QuotaSettings {
  limits: QuotaLimits;
  /** Per tenant: these limits replace the defaults they name (0 lifts one). */
  tenants?: Readonly<Record<string, QuotaLimits>>;
  /** Shards of a tenant's counters, written at random and read together. @default 4 */
  shards?: number;
}

export const DEFAULT_QUOTA_SHARDS = 4;

export type QuotaLimitName =
  | 'tenant_turns_per_minute'
  | 'tenant_tokens_per_day'
  | 'user_turns_per_minute'
  | 'user_tokens_per_day'
  | 'runs_per_key_per_minute'
  | 'runs_per_address_per_minute'
  /** A webhook's own `rate_limit` (Begin's security settings; lib/webhooks/delivery.ts). */
  | 'webhook_rate_limit';

/** A budget is spent: `limit` names it, `retryAfter` (seconds) says when its window ends. */
export class RateLimitedError extends EaselError {
  constructor(
    readonly limit: QuotaLimitName,
    readonly retryAfter: number,
    message: string,
  ) {
    super('rate_limited', message);
  }
}

/** What the quota functions need of the engine. */
export interface QuotaContext {
  store: StoreContext;
  quotas?: QuotaSettings;
  /** Epoch ms. @default Date.now */
  clock?: () => number;
}

/** What a turn is, for its quotas. */
export interface QuotaRequest {
  tenant: string;
  actor?: Actor;
  clientAddress?: string;
  command?: 'stop';
}

/** The limits of one tenant: its overrides over the defaults. */
export function limitsFor(settings: QuotaSettings, tenant: string): QuotaLimits {
  const own = settings.tenants && Object.hasOwn(settings.tenants, tenant) ? settings.tenants[tenant] : undefined;
  return own ? { ...settings.limits, ...own } : settings.limits;
}

/**
 * Reads the turn's counters and judges them: resolves when the turn may run, rejects with
 * `RateLimitedError` when a budget is spent. Null when no turn limit applies (no round trip).
 * Started early and awaited later, the promise never reports an unhandled rejection.
 */
export function checkTurnQuota(ctx: QuotaContext, request: QuotaRequest): Promise<void> | null {
  const plan = usagePlan(ctx, request);
  if (!plan || request.command === 'stop') return null;
  const { limits, at } = plan;
  const wanted = [...plan.tenantKeys, ...(plan.subjectKey ? [plan.subjectKey] : [])];
  const check = readUsage(ctx.store, wanted).then((usages) => {
    usages.forEach((u, i) => remember(wanted[i] as UsageKey, u));
    const minute = minuteOf(at);
    const tenant = sum(usages.slice(0, plan.tenantKeys.length), minute);
    const subject = plan.subjectKey ? sum(usages.slice(plan.tenantKeys.length), minute) : null;
    const who = plan.subjectKey?.scope.startsWith('user:') ? 'this end user' : 'this API key (no end user asserted)';
    const spent: RateLimitedError[] = [];
    const untilMinute = retryAfterMinute(at);
    const untilDay = retryAfterDay(at);
    if (limits.tenantTurnsPerMinute && tenant.turns >= limits.tenantTurnsPerMinute) {
      spent.push(new RateLimitedError('tenant_turns_per_minute', untilMinute, `the tenant's limit of ${limits.tenantTurnsPerMinute} turns a minute is reached; retry in ${untilMinute} s`));
    }
    if (subject && limits.userTurnsPerMinute && subject.turns >= limits.userTurnsPerMinute) {
      spent.push(new RateLimitedError('user_turns_per_minute', untilMinute, `the limit of ${limits.userTurnsPerMinute} turns a minute for ${who} is reached; retry in ${untilMinute} s`));
    }
    if (limits.tenantTokensPerDay && tenant.tokens >= limits.tenantTokensPerDay) {
      spent.push(new RateLimitedError('tenant_tokens_per_day', untilDay, `the tenant's budget of ${limits.tenantTokensPerDay} model tokens a day is spent; it renews at 00:00 UTC, in ${untilDay} s`));
    }
    if (subject && limits.userTokensPerDay && subject.tokens >= limits.userTokensPerDay) {
      spent.push(new RateLimitedError('user_tokens_per_day', untilDay, `the budget of ${limits.userTokensPerDay} model tokens a day for ${who} is spent; it renews at 00:00 UTC, in ${untilDay} s`));
    }
    // the one to wait for longest: retrying before it ends would be refused again
    const refusal = spent.sort((a, b) => b.retryAfter - a.retryAfter)[0];
    if (refusal) throw refusal;
  });
  check.catch(() => undefined);
  return check;
}

/**
 * Counts a committed turn and its model tokens: one random shard of the tenant, and the turn's
 * subject. Never throws (the turn is committed whatever happens to its count).
 */
export async function countTurn(ctx: QuotaContext, request: QuotaRequest, tokens: number): Promise<void> {
  const plan = usagePlan(ctx, request);
  if (!plan) return;
  const { limits, at } = plan;
  const minute = minuteOf(at);
  const ttlSeconds = Math.floor(dayEnd(at) / 1000) + 86_400;
  const counted: UsageKey[] = [];
  const tenantOn = Boolean(limits.tenantTurnsPerMinute) || (Boolean(limits.tenantTokensPerDay) && tokens > 0);
  const shard = plan.tenantKeys[Math.floor(Math.random() * plan.tenantKeys.length)];
  if (tenantOn && shard) counted.push(shard);
  const subjectOn = Boolean(limits.userTurnsPerMinute) || (Boolean(limits.userTokensPerDay) && tokens > 0);
  if (subjectOn && plan.subjectKey) counted.push(plan.subjectKey);
  await Promise.all(counted.map(async (key) => {
    try {
      await addUsage(ctx.store, key, { minute, tokens, ttlSeconds }, lastMinute.get(memoKey(key)) === minute);
      remember(key, { minute, turns: 0, tokens: 0 });
    } catch {
      // an uncounted turn: the budget may be overshot by it
    }
  }));
}

/**
 * A run started by an execute key alone (no end user, no run token): takes one of the minute's
 * run starts of its client address, then of its key; `RateLimitedError` past either limit.
 */
export async function takeRunQuota(ctx: QuotaContext, request: QuotaRequest): Promise<void> {
  if (!ctx.quotas || request.actor?.kind !== 'execute_key') return;
  const limits = limitsFor(ctx.quotas, request.tenant);
  const at = now(ctx);
  const minute = minuteOf(at);
  const retryAfter = retryAfterMinute(at);
  const ttlSeconds = Math.ceil(((minute + 1) * 60_000) / 1000) + 3600;
  const address = request.clientAddress ? addressScope(request.clientAddress) : undefined;
  if (limits.runsPerAddressPerMinute && address) {
    const taken = await takeRunStart(ctx.store, { tenant: request.tenant, scope: `addr:${address}`, minute }, limits.runsPerAddressPerMinute, ttlSeconds);
    if (!taken) throw new RateLimitedError('runs_per_address_per_minute', retryAfter, `this client address may start ${limits.runsPerAddressPerMinute} runs a minute with an execute key; retry in ${retryAfter} s`);
  }
  if (limits.runsPerKeyPerMinute) {
    const taken = await takeRunStart(ctx.store, { tenant: request.tenant, scope: scoped(`key:${request.actor.id}`), minute }, limits.runsPerKeyPerMinute, ttlSeconds);
    if (!taken) throw new RateLimitedError('runs_per_key_per_minute', retryAfter, `this API key may start ${limits.runsPerKeyPerMinute} runs a minute without an end user; retry in ${retryAfter} s`);
  }
}

/** Whether a run start could be limited for this request (no round trip when not). */
export function runQuotaApplies(ctx: QuotaContext, request: QuotaRequest): boolean {
  if (!ctx.quotas || request.actor?.kind !== 'execute_key') return false;
  const limits = limitsFor(ctx.quotas, request.tenant);
  return Boolean(limits.runsPerKeyPerMinute || (limits.runsPerAddressPerMinute && request.clientAddress));
}

/**
 * A client address as it is counted: IPv4 as dotted decimal (also when mapped into IPv6), IPv6
 * by its /64 (one host usually holds a whole /64), anything else as given.
 */
export function addressScope(address: string): string {
  const ip = parseIp(address);
  if (!ip) return scoped(address.trim().toLowerCase());
  const b = ip.bytes;
  const mapped = ip.family === 6 && b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;
  if (ip.family === 4 || mapped) return Array.from(ip.family === 4 ? b : b.slice(12)).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 8; i += 2) groups.push((((b[i] as number) << 8) | (b[i + 1] as number)).toString(16));
  return `${groups.join(':')}::/64`;
}

// ---- windows and keys ---------------------------------------------------------------------

interface UsagePlan {
  limits: QuotaLimits;
  at: number;
  tenantKeys: UsageKey[];
  subjectKey: UsageKey | null;
}

/** The usage counters a turn of `request` reads and writes; null when no turn limit applies. */
function usagePlan(ctx: QuotaContext, request: QuotaRequest): UsagePlan | null {
  if (!ctx.quotas) return null;
  const limits = limitsFor(ctx.quotas, request.tenant);
  const subject = quotaSubject(request.actor);
  const tenantOn = Boolean(limits.tenantTurnsPerMinute || limits.tenantTokensPerDay);
  const subjectOn = subject !== null && Boolean(limits.userTurnsPerMinute || limits.userTokensPerDay);
  if (!tenantOn && !subjectOn) return null;
  const at = now(ctx);
  const day = new Date(at).toISOString().slice(0, 10);
  const shards = ctx.quotas.shards ?? DEFAULT_QUOTA_SHARDS;
  return {
    limits,
    at,
    tenantKeys: tenantOn ? Array.from({ length: shards }, (_, i) => ({ tenant: request.tenant, scope: `~${i}`, day })) : [],
    subjectKey: subjectOn ? { tenant: request.tenant, scope: scoped(subject as string), day } : null,
  };
}

/** Turns in `minute` and tokens of the day, over some counters. */
function sum(usages: readonly Usage[], minute: number): { turns: number; tokens: number } {
  let turns = 0;
  let tokens = 0;
  for (const u of usages) {
    if (u.minute === minute) turns += u.turns;
    tokens += u.tokens;
  }
  return { turns, tokens };
}

/** Scopes stay short in a key: a long user id is counted by its hash. */
function scoped(scope: string): string {
  return scope.length <= 160 ? scope : `h:${createHash('sha256').update(scope).digest('hex')}`;
}

/** The minute each counter was last seen at in this process: which update a count tries first. */
const lastMinute = new Map<string, number>();
const LAST_MINUTE_ENTRIES = 10_000;
const memoKey = (k: UsageKey) => `${k.tenant}\u0000${k.scope}\u0000${k.day}`;

function remember(key: UsageKey, usage: Usage): void {
  if (usage.minute === null) return;
  if (lastMinute.size >= LAST_MINUTE_ENTRIES) lastMinute.clear();
  lastMinute.set(memoKey(key), usage.minute);
}

const minuteOf = (at: number) => Math.floor(at / 60_000);
const dayEnd = (at: number) => (Math.floor(at / 86_400_000) + 1) * 86_400_000;
const retryAfterMinute = (at: number) => Math.max(1, Math.ceil(((minuteOf(at) + 1) * 60_000 - at) / 1000));
const retryAfterDay = (at: number) => Math.max(1, Math.ceil((dayEnd(at) - at) / 1000));
const now = (ctx: QuotaContext) => (ctx.clock ?? Date.now)();
