// The resolvers the service DNS responder forwards other names to: the host's own, from
// /etc/resolv.conf, read again when the file changes (DHCP, NetworkManager and resolvconf
// rewrite it). A loopback stub such as systemd-resolved's 127.0.0.53 is kept: shoal forwards
// from the host, where it is reachable, not from the container.

import { readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';

export interface Upstream {
  host: string;
  port: number;
}

/** glibc reads at most three nameserver lines; so does this. */
export const upstreamsMax = 3;
export const resolvConfPath = '/etc/resolv.conf';

/** The nameservers of a resolv.conf text, in order; lines that are not an IP address are skipped. */
export function parseResolvConf(text: string): Upstream[] {
  const out: Upstream[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    // A link-local IPv6 address carries its interface (`fe80::1%eth0`); Node's sockets take it as is.
    const host = m?.[1];
    if (host === undefined || isIP(host.replace(/%.*$/, '')) === 0) continue;
    if (out.length < upstreamsMax) out.push({ host, port: 53 });
  }
  return out;
}

/** The host's resolvers, re-read when resolv.conf's modification time changes; none when it cannot be read. */
export function resolvConfUpstreams(file = resolvConfPath): () => Upstream[] {
  let seenMtimeMs = -1;
  let cached: Upstream[] = [];
  return () => {
    try {
      const mtimeMs = statSync(file).mtimeMs;
      if (mtimeMs !== seenMtimeMs) {
        cached = parseResolvConf(readFileSync(file, 'utf8'));
        seenMtimeMs = mtimeMs;
      }
    } catch {
      cached = [];
      seenMtimeMs = -1;
    }
    return cached;
  };
}
