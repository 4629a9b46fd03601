// The routing mesh's table (net/ingress-render.ts): what it holds for a given view of the store,
// and that nftables itself accepts it (`nft -c -f -`: parsed and checked by the kernel, applied
// nowhere). Needs root and nft, as the firewall's tests do (.ci/run installs nft).

import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { parseIngressAppliedComment, renderIngress, ingressBackendsMax, type IngressRenderInput } from '../../net/ingress-render.ts';
import { ingressCtMark } from '../../net/ingress-marks.ts';
import { acceptMark, renderFirewall } from '../../net/firewall-render.ts';

const base: IngressRenderInput = {
  nodeId: 'n1', term: 4, revision: 321, address: '10.255.1.1',
  services: [
    { name: 'web', createdAt: 10, ports: [{ published: 8080, target: 80, protocol: 'tcp' }, { published: 8443, target: 443, protocol: 'tcp' }], backends: ['10.255.2.7', '10.255.1.5'] },
    { name: 'dns', createdAt: 11, ports: [{ published: 53, target: 5353, protocol: 'udp' }, { published: 53, target: 5353, protocol: 'tcp' }], backends: ['10.255.3.2'] },
    { name: 'idle', createdAt: 12, ports: [{ published: 9000, target: 9000, protocol: 'tcp' }, { published: 9001, target: 9001, protocol: 'udp' }], backends: [] },
  ],
  published: null,
  subnets: ['10.255.0.0/16', '10.61.0.0/16'],
};

/** `nft -c -f -`: null when nftables accepts the text, else what it said. */
function nftCheck(text: string): string | null {
  const r = spawnSync('nft', ['-c', '-f', '-'], { input: text, encoding: 'utf8' });
  if (r.error !== undefined) throw new Error(`nft cannot run here (${r.error.message}); install nftables (apt-get install -y nftables) and run as root`);
  return r.status === 0 ? null : r.stderr;
}

const rulesOf = (text: string, chain: string): string[] => {
  const body = new RegExp(`\\n  chain ${chain} \\{\\n([\\s\\S]*?)\\n?  \\}`).exec(text)?.[1] ?? '';
  return body.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('type '));
};

describe('renderIngress', () => {
  it('DNATs each ingress port to its backends with random spreading, at the target port, on prerouting and output', () => {
    const { text, backends } = renderIngress(base);
    const mark = `0x${ingressCtMark.toString(16).padStart(8, '0')}`;
    expect(rulesOf(text, 'mesh')).toEqual([
      `tcp dport 53 ct mark set ct mark | ${mark} dnat to 10.255.3.2 : 5353 comment "service dns"`,
      `tcp dport 8080 ct mark set ct mark | ${mark} dnat to numgen random mod 2 map { 0 : 10.255.1.5, 1 : 10.255.2.7 } : 80 comment "service web"`,
      `tcp dport 8443 ct mark set ct mark | ${mark} dnat to numgen random mod 2 map { 0 : 10.255.1.5, 1 : 10.255.2.7 } : 443 comment "service web"`,
      `udp dport 53 ct mark set ct mark | ${mark} dnat to 10.255.3.2 : 5353 comment "service dns"`,
    ]);
    // Hairpin (the node's containers) and the host itself: both hooks jump to the same rules; loopback is left alone.
    expect(rulesOf(text, 'prerouting')).toEqual(['ip daddr != 127.0.0.0/8 fib daddr type local jump mesh']);
    expect(rulesOf(text, 'output')).toEqual(['ip daddr != 127.0.0.0/8 fib daddr type local jump mesh']);
    expect(backends).toEqual([
      { address: '10.255.1.5', protocol: 'tcp', port: 80 }, { address: '10.255.1.5', protocol: 'tcp', port: 443 },
      { address: '10.255.2.7', protocol: 'tcp', port: 80 }, { address: '10.255.2.7', protocol: 'tcp', port: 443 },
      { address: '10.255.3.2', protocol: 'tcp', port: 5353 }, { address: '10.255.3.2', protocol: 'udp', port: 5353 },
    ]);
  });

  it('SNATs marked connections to the node\'s ingress address, clamps their MSS to the route\'s MTU, and marks them for Docker', () => {
    const { text } = renderIngress(base);
    expect(rulesOf(text, 'postrouting')).toEqual([`ct mark & 0x00200000 == 0x00200000 snat to 10.255.1.1 comment "replies come back through this node"`]);
    expect(rulesOf(text, 'forward')).toEqual([
      'ct mark & 0x00200000 == 0x00200000 tcp flags syn / syn,rst tcp option maxseg size set rt mtu comment "the overlay\'s MTU"',
      `ct mark & 0x00200000 == 0x00200000 meta mark set meta mark | 0x${acceptMark.toString(16).padStart(8, '0')} comment "Docker's DOCKER-USER accepts it"`,
    ]);
  });

  it('refuses a port without a running, healthy task rather than leave it to the host', () => {
    const { text } = renderIngress(base);
    expect(rulesOf(text, 'no_backend')).toEqual([
      'tcp dport 9000 ct mark & 0x00200000 == 0 reject with tcp reset comment "no running, healthy task"',
      'udp dport 9001 ct mark & 0x00200000 == 0 reject comment "no running, healthy task"',
    ]);
    expect(text).not.toContain('dport 9000 ct mark set');
  });

  it('drops, before the DNAT, the ports no publish rule opens on this node, for sources outside the networks (firewall on)', () => {
    const open = rulesOf(renderIngress(base).text, 'publish_filter');
    expect(open).toEqual([]);
    const { text } = renderIngress({ ...base, published: [{ protocol: 'tcp', port: 8080 }, { protocol: 'udp', port: 53 }] });
    expect(rulesOf(text, 'publish_filter')).toEqual([
      'ip saddr != { 10.255.0.0/16, 10.61.0.0/16 } fib daddr type local tcp dport { 53, 8443, 9000 } drop comment "no publish rule opens it on this node"',
      'ip saddr != { 10.255.0.0/16, 10.61.0.0/16 } fib daddr type local udp dport 9001 drop comment "no publish rule opens it on this node"',
    ]);
  });

  it('gives a port claimed twice to the older service, and says so', () => {
    const r = renderIngress({ ...base, services: [...base.services, { name: 'late', createdAt: 99, ports: [{ published: 8080, target: 8080, protocol: 'tcp' }], backends: ['10.255.9.9'] }] });
    expect(r.conflicts).toEqual([{ protocol: 'tcp', port: 8080, kept: 'web', dropped: 'late' }]);
    expect(r.text).not.toContain('10.255.9.9');
  });

  it('forwards nothing before the node has an address on the ingress network, and refuses the ports meanwhile', () => {
    const { text, backends } = renderIngress({ ...base, address: null });
    expect(rulesOf(text, 'mesh')).toEqual([]);
    expect(rulesOf(text, 'postrouting')).toEqual([]);
    expect(backends).toEqual([]);
    expect(rulesOf(text, 'no_backend')).toEqual(['tcp dport { 53, 8080, 8443, 9000 } ct mark & 0x00200000 == 0 reject with tcp reset comment "no running, healthy task"', 'udp dport { 53, 9001 } ct mark & 0x00200000 == 0 reject comment "no running, healthy task"']);
  });

  it('preferLocal: a port with a task on this node goes to this node\'s tasks only, not SNATed for sources outside the networks', () => {
    const local = { ...base, preferLocal: true, services: base.services.map((s) => (s.name === 'web' ? { ...s, local: ['10.255.1.5'] } : s)) };
    const { text, backends } = renderIngress(local);
    const mark = `0x${ingressCtMark.toString(16).padStart(8, '0')}`;
    expect(rulesOf(text, 'mesh')).toEqual([
      `tcp dport 53 ct mark set ct mark | ${mark} dnat to 10.255.3.2 : 5353 comment "service dns"`,
      `tcp dport 8080 ct mark set ct mark | ${mark} dnat to 10.255.1.5 : 80 comment "service web, its tasks on this node (preferLocal)"`,
      `tcp dport 8443 ct mark set ct mark | ${mark} dnat to 10.255.1.5 : 443 comment "service web, its tasks on this node (preferLocal)"`,
      `udp dport 53 ct mark set ct mark | ${mark} dnat to 10.255.3.2 : 5353 comment "service dns"`,
    ]);
    // Sources outside the cluster's networks keep their address; containers' connections (hairpin) are still SNATed.
    expect(rulesOf(text, 'postrouting')).toEqual([
      'ct mark & 0x00200000 == 0x00200000 ip saddr != { 10.255.0.0/16, 10.61.0.0/16 } ip daddr . meta l4proto . th dport @local_backends accept comment "preferLocal: a task of this node, the source kept"',
      'ct mark & 0x00200000 == 0x00200000 snat to 10.255.1.1 comment "replies come back through this node"',
    ]);
    expect(text).toMatch(/set local_backends \{\n[^}]*elements = \{\n {6}10\.255\.1\.5 \. tcp \. 80,\n {6}10\.255\.1\.5 \. tcp \. 443\n/);
    // The backends set (conntrack's view) holds what the DNAT uses: the remote task of web is not there.
    expect(backends.map((b) => b.address)).not.toContain('10.255.2.7');
    expect(nftCheck(text)).toBeNull();
    // Off (the default), or no task here: spread over every task, every connection SNATed, as before.
    expect(renderIngress({ ...local, preferLocal: false }).text).toBe(renderIngress(base).text);
    const none = renderIngress({ ...local, services: base.services.map((s) => ({ ...s, local: [] })) });
    expect(rulesOf(none.text, 'mesh')).toEqual(rulesOf(renderIngress(base).text, 'mesh'));
    expect(rulesOf(none.text, 'postrouting')).toEqual(rulesOf(renderIngress(base).text, 'postrouting'));
  });

  it('sends no new connection to a backend on a suspect node while the port has another, and keeps it in the backends set (its flows stay)', () => {
    const mark = `0x${ingressCtMark.toString(16).padStart(8, '0')}`;
    const withSuspect = { ...base, services: base.services.map((s) => (s.name === 'web' ? { ...s, suspect: ['10.255.2.7'] } : s)) };
    const r = renderIngress(withSuspect);
    expect(rulesOf(r.text, 'mesh')).toContain(`tcp dport 8080 ct mark set ct mark | ${mark} dnat to 10.255.1.5 : 80 comment "service web"`);
    expect(r.text).not.toMatch(/dnat to [^\n]*10\.255\.2\.7/);
    // Still a backend of the table: the applier ends its connections only when it leaves the set (node down).
    expect(r.backends).toEqual(renderIngress(base).backends);
    expect(nftCheck(r.text)).toBeNull();
    // Every backend suspect: they may all be alive; the port is not refused.
    const all = renderIngress({ ...base, services: base.services.map((s) => (s.name === 'web' ? { ...s, suspect: [...s.backends] } : s)) });
    expect(rulesOf(all.text, 'mesh')).toEqual(rulesOf(renderIngress(base).text, 'mesh'));
    expect(rulesOf(all.text, 'no_backend')).toEqual(rulesOf(renderIngress(base).text, 'no_backend'));
  });

  it('records the term and revision it came from, read back as written', () => {
    const { text } = renderIngress(base);
    const comment = /comment "(shoal-ingress [^"]+)"/.exec(text)?.[1] ?? '';
    expect(parseIngressAppliedComment(comment)).toEqual({ nodeId: 'n1', term: 4, revision: 321 });
  });

  it('keeps at most ingressBackendsMax backends per port, the lowest addresses, and says which service', () => {
    const many = Array.from({ length: ingressBackendsMax + 3 }, (_, i) => `10.${200 + Math.floor(i / 65536)}.${Math.floor(i / 256) % 256}.${i % 256}`);
    const r = renderIngress({ ...base, services: [{ name: 'big', createdAt: 1, ports: [{ published: 80, target: 80, protocol: 'tcp' }], backends: many }] });
    expect(r.truncated).toEqual(['big']);
    expect(r.backends).toHaveLength(ingressBackendsMax);
    expect(nftCheck(r.text)).toBeNull();
  });

  it('is accepted by nftables: the full table, an empty one, the firewall on, and no address yet', () => {
    expect(nftCheck(renderIngress(base).text)).toBeNull();
    expect(nftCheck(renderIngress({ ...base, services: [] }).text)).toBeNull();
    expect(nftCheck(renderIngress({ ...base, published: [{ protocol: 'tcp', port: 8080 }], subnets: [] }).text)).toBeNull();
    expect(nftCheck(renderIngress({ ...base, address: null }).text)).toBeNull();
    // The check can fail: a table nftables refuses is reported.
    expect(nftCheck(renderIngress(base).text.replace('numgen random', 'numgen bogus'))).not.toBeNull();
  });

  it('the firewall accepts what the mesh forwards, in its own forward chain', () => {
    const fw = renderFirewall({ node: { id: 'n1', name: 'n1', labels: {} }, term: 1, revision: 1, managementPorts: [], networks: [], policies: [], services: [], tasks: [] });
    expect(fw.text).toContain(`ct mark & 0x00200000 == 0x00200000 meta mark set meta mark | 0x${acceptMark.toString(16).padStart(8, '0')} accept comment "routing mesh`);
    expect(nftCheck(fw.text)).toBeNull();
  });
});
