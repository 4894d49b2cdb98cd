/** Outbound HTTP to tenant-supplied URLs (Invoke, webhooks, callbacks), behind the SSRF guard. */
export {
  type AddressClass,
  type Cidr,
  cidrContains,
  classifyIp,
  embeddedIpv4,
  formatIp,
  type IpAddress,
  parseCidr,
  parseIp,
} from './ip';
export {
  DEFAULT_MAX_REDIRECTS,
  DEFAULT_MAX_RESPONSE_BYTES,
  OutboundError,
  type OutboundFailure,
  outboundRequest,
  type OutboundRequestOptions,
  type OutboundResponse,
} from './request';
export {
  parseAllowList,
  type ResolvedAddress,
  type Resolver,
  SsrfBlockedError,
  type SsrfCheckResult,
  SsrfGuard,
  type SsrfGuardOptions,
  type SsrfReason,
} from './ssrf';
