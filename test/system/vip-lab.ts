// Three shoal nodes in a NetLab's first three namespaces with one virtual IP on the lab's LAN, as
// test/system/vip-netns.test.ts and bench/vip.ts run them: identities under one CA (n1's), an
// admin client certificate in use by this process, and each node's shoal.yaml (the memory
// runtime) naming the VIP `<lan>.200` (labVip: also the overlay lab's, bench/vip-task-loss.ts).
// `config` adds to every node's configuration.

import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { initNode } from '../../src/node/identity.ts';
import { issueClientCert } from '../../src/security/client-certs.ts';
import { isIpv6 } from '../../src/resources/vips.ts';
import { useClientCertificate } from '../faults/http.ts';
import type { NetLab } from '../faults/netns.ts';
import type { ShoalHost } from '../faults/shoal-in-ns.ts';

export interface VipNode extends ShoalHost {
  id: string;
  ip: string;
  dir: string;
}

/** The lab's VIP, `<lan>.200`, and its entry of a node's `vips` config (`nodes`: who may hold it). */
export function labVip(lab: NetLab, nodes?: readonly string[]): { vip: string; entry: { address: string; subnet: string; nodes?: string[] } } {
  const subnet = lab.ip(1).split('.').slice(0, 3).join('.');
  const vip = `${subnet}.200`;
  return { vip, entry: { address: vip, subnet: `${subnet}.0/24`, ...(nodes !== undefined ? { nodes: [...nodes] } : {}) } };
}

/** The IPv6 lab's addresses (bench/vip.ts --ipv6): each namespace's fd00:38::<slot>/64 and the VIP fd00:38::100. */
export const lab6 = { host: (slot: number): string => `fd00:38::${slot}`, vip: 'fd00:38::100', subnet: 'fd00:38::/64' };

/** `vip`: another VIP entry than the lab's IPv4 one (an IPv6 lab's). */
export async function vipNodes(lab: NetLab, runDir: string, principal: string, config: Record<string, unknown> = {}, vipEntry?: { address: string; subnet: string }): Promise<{ nodes: VipNode[]; vip: string }> {
  const { vip, entry } = vipEntry === undefined ? labVip(lab) : { vip: vipEntry.address, entry: vipEntry };
  const nodes: VipNode[] = [];
  const caDir = path.join(runDir, 'n1');
  for (let slot = 1; slot <= 3; slot++) {
    const ip = lab.ip(slot);
    const dir = path.join(runDir, `n${slot}`);
    mkdirSync(dir, { recursive: true });
    const identity = await initNode({ dataDir: dir, name: `n${slot}`, hosts: [ip], ...(slot > 1 ? { caFrom: caDir } : {}) });
    nodes.push({ slot, name: `n${slot}`, id: identity.id, ip, api: `${ip}:7100`, dir, proc: undefined });
  }
  const ca = { certPem: readFileSync(path.join(caDir, 'tls', 'ca.crt'), 'utf8'), keyPem: readFileSync(path.join(caDir, 'tls', 'ca.key'), 'utf8') };
  const cert = await issueClientCert(ca, { principal, role: 'admin' });
  useClientCertificate({ caPem: ca.certPem, certPem: cert.certPem, keyPem: cert.keyPem });
  const bootstrap = nodes.map((n) => ({ id: n.id, name: n.name, peerAddress: `${n.ip}:7200`, apiAddress: n.api }));
  for (const n of nodes) {
    writeFileSync(path.join(n.dir, 'shoal.yaml'), stringify({
      dataDir: '.', api: { listen: n.api }, peer: { listen: `${n.ip}:7200` }, bootstrap, runtime: { kind: 'memory' }, logLevel: 'info',
      ...config,
      vips: [entry],
    }));
  }
  return { nodes, vip };
}

/** Runs a program to its end: its exit code (null when it could not start) and what it printed. */
export function exec(argv: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn(argv[0] ?? '', argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    c.stdout.on('data', (b: Buffer) => { out += b.toString(); });
    c.once('error', () => resolve({ code: null, out }));
    c.once('close', (code) => resolve({ code, out }));
  });
}

/** Which of the namespaces `slots` hold `vip` on their eth0 now, in the order given. */
export async function vipHolders(lab: NetLab, slots: readonly number[], vip: string): Promise<number[]> {
  const family = isIpv6(vip) ? '-6' : '-4';
  const r = await Promise.all(slots.map((slot) => exec(['ip', '-n', lab.ns(slot), '-j', family, 'addr', 'show', 'dev', 'eth0'])));
  return slots.filter((_, i) => (r[i]?.out ?? '').includes(`"local":"${vip}"`));
}
