/** EASEL_QUOTA_*: off by default, validated, problems naming the variable. */
import { describe, expect, it } from 'vitest';
import { ConfigError, readConfig } from '../../lib/config';
import { limitsFor } from '../../lib/turns/quotas';

describe('quota configuration', () => {
  it('is off with nothing set (and with every limit 0)', () => {
    expect(readConfig({}).quotas).toBeUndefined();
    expect(readConfig({ EASEL_QUOTA_TENANT_TURNS_PER_MINUTE: '0', EASEL_QUOTA_SHARDS: '8' }).quotas).toBeUndefined();
    expect(readConfig({}).http.trustedProxyHops).toBe(0);
  });

  it('reads every limit, the shards, per-tenant overrides and the trusted proxies', () => {
    const config = readConfig({
      EASEL_QUOTA_TENANT_TURNS_PER_MINUTE: '6000',
      EASEL_QUOTA_TENANT_TOKENS_PER_DAY: '50000000',
      EASEL_QUOTA_USER_TURNS_PER_MINUTE: '60',
      EASEL_QUOTA_USER_TOKENS_PER_DAY: '200000',
      EASEL_QUOTA_RUNS_PER_KEY_PER_MINUTE: '600',
      EASEL_QUOTA_RUNS_PER_ADDRESS_PER_MINUTE: '10',
      EASEL_QUOTA_SHARDS: '8',
      EASEL_QUOTA_TENANTS: '{"acme": {"tenant_turns_per_minute": 60000, "user_tokens_per_day": 0}}',
      EASEL_QUOTA_TRUSTED_PROXY_HOPS: '1',
    });
    const quotas = config.quotas;
    expect(quotas).toEqual({
      limits: { tenantTurnsPerMinute: 6000, tenantTokensPerDay: 50_000_000, userTurnsPerMinute: 60, userTokensPerDay: 200_000, runsPerKeyPerMinute: 600, runsPerAddressPerMinute: 10 },
      tenants: { acme: { tenantTurnsPerMinute: 60_000, userTokensPerDay: 0 } },
      shards: 8,
    });
    expect(config.http.trustedProxyHops).toBe(1);
    if (!quotas) throw new Error('quotas expected');
    expect(limitsFor(quotas, 'acme')).toMatchObject({ tenantTurnsPerMinute: 60_000, userTokensPerDay: 0, userTurnsPerMinute: 60 });
    expect(limitsFor(quotas, 'other')).toMatchObject({ tenantTurnsPerMinute: 6000 });
    // a per-tenant limit alone turns quotas on, for that tenant only
    expect(readConfig({ EASEL_QUOTA_TENANTS: '{"acme": {"runs_per_key_per_minute": 5}}' }).quotas).toEqual({ limits: {}, tenants: { acme: { runsPerKeyPerMinute: 5 } } });
  });

  it('reports every problem together, naming the variable', () => {
    let error: unknown;
    try {
      readConfig({
        EASEL_QUOTA_USER_TURNS_PER_MINUTE: 'sixty',
        EASEL_QUOTA_TENANT_TOKENS_PER_DAY: '-1',
        EASEL_QUOTA_SHARDS: '100',
        EASEL_QUOTA_TRUSTED_PROXY_HOPS: 'yes',
        EASEL_QUOTA_TENANTS: '{"acme": {"turns": 5, "user_turns_per_minute": 1.5}, "beta": 3}',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toMatch(/EASEL_QUOTA_USER_TURNS_PER_MINUTE must be an integer from 0/);
    expect(problems).toMatch(/EASEL_QUOTA_TENANT_TOKENS_PER_DAY must be an integer from 0/);
    expect(problems).toMatch(/EASEL_QUOTA_SHARDS must be an integer from 1 to 64/);
    expect(problems).toMatch(/EASEL_QUOTA_TRUSTED_PROXY_HOPS must be an integer from 0 to 10/);
    expect(problems).toMatch(/EASEL_QUOTA_TENANTS: "acme" names an unknown limit "turns"/);
    expect(problems).toMatch(/EASEL_QUOTA_TENANTS: "acme".user_turns_per_minute must be an integer/);
    expect(problems).toMatch(/EASEL_QUOTA_TENANTS: the limits of "beta" must be an object/);
    expect(() => readConfig({ EASEL_QUOTA_TENANTS: '[1]' })).toThrow(/EASEL_QUOTA_TENANTS must be a JSON object/);
  });
});
