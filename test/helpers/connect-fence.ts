/**
 * A fence around net.Socket#connect: records every connection attempt and fails any that is
 * not to loopback, and any name the system would resolve itself (not pinned by a `lookup`), so
 * "refused before connecting" is observed, not assumed, and no test sends a packet off this
 * machine. `install()` in beforeEach, `remove()` in afterEach.
 */
import net, { isIP, type LookupFunction } from 'node:net';

export interface ConnectAttempt {
  host: string;
  port: number;
}

export function isLoopback(address: string): boolean {
  return /^127\./.test(address) || address === '::1' || /^::ffff:127\./i.test(address) || /^::ffff:7f[0-9a-f]{2}:/i.test(address);
}

export function connectFence() {
  const attempts: ConnectAttempt[] = [];
  const original = net.Socket.prototype.connect;
  return {
    attempts,
    install() {
      attempts.length = 0;
      net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
        // net.createConnection passes its normalised [options, callback] array as the first argument
        const first = args[0];
        const options = (Array.isArray(first) ? first[0] : first) as { host?: string; port?: number; lookup?: LookupFunction } | undefined;
        const host = options?.host ?? '';
        attempts.push({ host, port: Number(options?.port) });
        if (isIP(host) !== 0) {
          if (!isLoopback(host)) throw new Error(`fence: connection to ${host} attempted`);
        } else {
          const lookup = options?.lookup;
          if (!options || typeof lookup !== 'function') throw new Error(`fence: ${host} would be resolved by the system`);
          options.lookup = (hostname, opts, callback) =>
            lookup(hostname, opts, (err, address, family) => {
              const list = typeof address === 'string' ? [address] : address.map((a) => a.address);
              if (!err && !list.every(isLoopback)) return callback(new Error(`fence: ${hostname} pinned to ${list.join(',')}`), '', 0);
              callback(err, address, family);
            });
        }
        return (original as (...a: unknown[]) => net.Socket).apply(this, args);
      } as typeof net.Socket.prototype.connect;
    },
    remove() {
      net.Socket.prototype.connect = original;
    },
  };
}
