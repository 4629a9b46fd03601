// The routing mesh with real packets (net/ingress-render.ts applied by net/ingress.ts), in network
// namespaces: three nodes on a "LAN" bridge with a client, and the overlay as the one L2 segment
// that VXLAN gives the nodes' ingress bridges (each node holds its gateway of the ingress
// network there; each task its address, its default route through its own node's gateway, as in
// Docker). Two tasks of one service (on n1 and n2) publish 8080 (TCP and UDP); n3 runs none.
//
// What it shows: the port is reached through each node's LAN address, the one without a task
// included, and from a node's host itself (the output hook); UDP is spread over both tasks; when
// a task leaves the table, its open connections are ended (conntrack) and new ones, TCP and UDP,
// go only to the other. With preferLocal, a node that runs a task sends the port's connections
// to it alone and the task sees the client's own address, while a node without one still
// spreads (and SNATs). Docker's FORWARD policy DROP is in place (iptables), so the DOCKER-USER
// mark rule is exercised too.
//
// Needs root, ip, nft, conntrack, iptables (.ci/run installs them); run it under the lock:
//
//   flock /tmp/shoal-heavy.lock npx vitest run test/net/ingress-mesh.test.ts

import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFlows } from '../../net/conntrack.ts';
import { commandRunner } from '../../net/firewall-command.ts';
import { Ingress, dockerIngressRuleComment } from '../../net/ingress.ts';
import { renderIngress, type IngressRenderInput } from '../../net/ingress-render.ts';
import { pidAlive, runQuiet } from '../faults/netns.ts';
import { Workload, labPrerequisites } from './firewall-lab.ts';

const fixture = path.resolve(import.meta.dirname, '../fixtures/net-workload.mjs');
const tag = `shoaling-${process.pid}`;
const sw = `${tag}-sw`;
const nodes = [
  { name: 'n1', lan: '192.168.77.11', gateway: '10.255.1.1' },
  { name: 'n2', lan: '192.168.77.12', gateway: '10.255.2.1' },
  { name: 'n3', lan: '192.168.77.13', gateway: '10.255.3.1' },
] as const;
const tasks = [{ name: 't1', node: 'n1', address: '10.255.1.2', gateway: '10.255.1.1' }, { name: 't2', node: 'n2', address: '10.255.2.2', gateway: '10.255.2.1' }] as const;
const published = 8080;
const target = 80;

function sh(cmd: string, args: readonly string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout;
}

const nsOf = (name: string): string => `${tag}-${name}`;

function removeLabs(all: boolean): void {
  for (const ns of runQuiet('ip', ['netns', 'list']).split('\n').map((l) => l.split(' ')[0] ?? '')) {
    const m = /^shoaling-(\d+)-/.exec(ns);
    if (m === null || (!all && (Number(m[1]) === process.pid || pidAlive(Number(m[1]))))) continue;
    if (all && Number(m[1]) !== process.pid) continue;
    for (const pid of runQuiet('ip', ['netns', 'pids', ns]).split(/\s+/).filter(Boolean)) {
      try { process.kill(Number(pid), 'SIGKILL'); } catch { /* gone */ }
    }
    runQuiet('ip', ['netns', 'del', ns]);
  }
}

/** A namespace with its eth `ifname` on the switch's bridge `bridge`, address `cidr`. */
function attach(ns: string, ifname: string, bridge: string, cidr: string, peer: string): void {
  sh('ip', ['-n', sw, 'link', 'add', peer, 'type', 'veth', 'peer', 'name', ifname, 'netns', ns]);
  sh('ip', ['-n', sw, 'link', 'set', peer, 'master', bridge, 'up']);
  sh('ip', ['-n', ns, 'addr', 'add', cidr, 'dev', ifname]);
  sh('ip', ['-n', ns, 'link', 'set', ifname, 'up']);
}

function addNs(ns: string): void {
  sh('ip', ['netns', 'add', ns]);
  sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
}

describe('the routing mesh, with real packets in network namespaces', () => {
  const workloads = new Map<string, Workload>();
  const ingress = new Map(nodes.map((n) => [n.name, new Ingress(commandRunner({ prefix: ['ip', 'netns', 'exec', nsOf(n.name)] }))]));
  let revision = 10;

  const start = async (name: string, ports: readonly number[]): Promise<Workload> => {
    const child = spawn('ip', ['netns', 'exec', nsOf(name), process.execPath, fixture, ...ports.map(String)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const w = new Workload(name, '', child);
    workloads.set(name, w);
    await w.ready;
    return w;
  };
  const w = (name: string): Workload => {
    const found = workloads.get(name);
    if (found === undefined) throw new Error(`no workload ${name}`);
    return found;
  };

  /** Every node applies the table rendered for it with these backends; returns each node's report. */
  const applyAll = async (backends: readonly string[], preferLocal = false): Promise<Map<string, Awaited<ReturnType<Ingress['apply']>>>> => {
    revision += 1;
    const out = new Map<string, Awaited<ReturnType<Ingress['apply']>>>();
    for (const n of nodes) {
      const input: IngressRenderInput = {
        nodeId: n.name, term: 2, revision, address: n.gateway, published: null, subnets: ['10.255.0.0/16'], preferLocal,
        services: [{
          name: 'web', createdAt: 1, ports: [{ published, target, protocol: 'tcp' }, { published, target, protocol: 'udp' }], backends,
          local: tasks.filter((t) => t.node === n.name && backends.includes(t.address)).map((t) => t.address),
        }],
      };
      out.set(n.name, await (ingress.get(n.name) as Ingress).apply(renderIngress(input)));
    }
    return out;
  };
  const udpCount = async (name: string): Promise<number> => Number((await w(name).ask({ op: 'received', port: target })).count);
  const peers = async (name: string): Promise<string[]> => (await w(name).ask({ op: 'peers', port: target })).peers as string[];
  /** The peers a task accepted after the first `from`, once there are `n` of them (the accept may follow the client's connect by a moment). */
  const peersAfter = async (name: string, from: number, n: number): Promise<string[]> => {
    for (let i = 0; i < 100 && (await peers(name)).length < from + n; i++) await new Promise((r) => setTimeout(r, 20));
    return (await peers(name)).slice(from);
  };

  beforeAll(async () => {
    const missing = labPrerequisites();
    if (missing.length > 0) throw new Error(`the routing mesh test cannot run on this machine:\n  ${missing.join('\n  ')}`);
    removeLabs(false);
    addNs(sw);
    for (const br of ['lan', 'ovl']) {
      sh('ip', ['-n', sw, 'link', 'add', br, 'type', 'bridge']);
      sh('ip', ['-n', sw, 'link', 'set', br, 'up']);
    }
    for (const [i, n] of nodes.entries()) {
      const ns = nsOf(n.name);
      addNs(ns);
      attach(ns, 'eth0', 'lan', `${n.lan}/24`, `l${i}`);
      attach(ns, 'ing0', 'ovl', `${n.gateway}/16`, `o${i}`);
      sh('ip', ['netns', 'exec', ns, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
      // Docker's shape: FORWARD policy DROP, DOCKER-USER first.
      sh('ip', ['netns', 'exec', ns, 'iptables', '-w', '5', '-P', 'FORWARD', 'DROP']);
      sh('ip', ['netns', 'exec', ns, 'iptables', '-w', '5', '-N', 'DOCKER-USER']);
      sh('ip', ['netns', 'exec', ns, 'iptables', '-w', '5', '-A', 'FORWARD', '-j', 'DOCKER-USER']);
    }
    for (const [i, t] of tasks.entries()) {
      addNs(nsOf(t.name));
      attach(nsOf(t.name), 'eth0', 'ovl', `${t.address}/16`, `t${i}`);
      sh('ip', ['-n', nsOf(t.name), 'route', 'add', 'default', 'via', t.gateway]);
    }
    addNs(nsOf('client'));
    attach(nsOf('client'), 'eth0', 'lan', '192.168.77.100/24', 'c0');
    await Promise.all([start('t1', [target]), start('t2', [target]), start('client', []), start('n3', [])]);
  }, 60_000);

  afterAll(() => {
    for (const x of workloads.values()) x.stop();
    removeLabs(true);
  });

  it('is reached through every node, the one without a task included, and from a node\'s host itself', async () => {
    const reports = await applyAll(tasks.map((t) => t.address));
    expect([...reports.values()].every((r) => r.docker)).toBe(true);
    const ruleArgs = ['-C', 'DOCKER-USER', '-m', 'mark', '--mark', '0x100000/0x100000', '-m', 'comment', '--comment', dockerIngressRuleComment, '-j', 'ACCEPT'];
    expect(spawnSync('ip', ['netns', 'exec', nsOf('n3'), 'iptables', '-w', '5', ...ruleArgs]).status).toBe(0);
    for (const n of nodes) {
      for (let i = 0; i < 4; i++) expect(await w('client').reaches(n.lan, published), `client → ${n.name}:${published}`).toBe(true);
    }
    // The host of n3 (no task there) to its own LAN address: the output hook's DNAT.
    for (let i = 0; i < 4; i++) expect(await w('n3').reaches(nodes[2].lan, published), 'n3\'s host → its own port').toBe(true);
    // And a port the mesh does not publish is not opened by it.
    expect(await w('client').reaches(nodes[0].lan, published + 1, 800)).toBe(false);
  }, 60_000);

  it('spreads UDP over both tasks', async () => {
    const before = [await udpCount('t1'), await udpCount('t2')];
    // Each datagram from a new socket: a new flow, DNATed anew.
    for (let i = 0; i < 24; i++) await w('client').ask({ op: 'udp', host: nodes[2].lan, port: published, count: 1, gapMs: 0 });
    await new Promise((r) => setTimeout(r, 200));
    const settled = [await udpCount('t1') - (before[0] ?? 0), await udpCount('t2') - (before[1] ?? 0)];
    expect(settled[0]).toBeGreaterThan(0);
    expect(settled[1]).toBeGreaterThan(0);
    expect((settled[0] ?? 0) + (settled[1] ?? 0)).toBe(24);
  }, 30_000);

  it('when a task leaves the table, its open connections end and new ones, TCP and UDP, go only to the other', async () => {
    // Connections through n3 until at least one rests on each task (n3's conntrack table says which).
    const open = (): { protocol: string; reply: { src: string } }[] => parseFlows(sh('ip', ['netns', 'exec', nsOf('n3'), 'conntrack', '-L', '-p', 'tcp', '--state', 'ESTABLISHED']))
      .filter((f) => f.original.src === '192.168.77.100' && f.original.dport === published);
    const ids: string[] = [];
    for (let i = 0; i < 40 && new Set(open().map((f) => f.reply.src)).size < 2; i++) {
      ids.push(`c${i}`);
      expect((await w('client').ask({ op: 'open', id: `c${i}`, host: nodes[2].lan, port: published, timeoutMs: 2000 })).ok).toBe(true);
    }
    const flows = open();
    expect(flows).toHaveLength(ids.length);
    const onT1 = flows.filter((f) => f.reply.src === tasks[0].address).length;
    const onT2 = flows.filter((f) => f.reply.src === tasks[1].address).length;
    expect(onT1).toBeGreaterThan(0);
    expect(onT2).toBeGreaterThan(0);
    for (const id of ids) expect((await w('client').ask({ op: 'echo', id, timeoutMs: 2000 })).ok, `${id} before`).toBe(true);

    // t1 stops being a backend (its process still answers: only the mesh can stop traffic to it).
    const reports = await applyAll([tasks[1].address]);
    expect(reports.get('n3')?.removed).toEqual([{ address: tasks[0].address, protocol: 'tcp', port: target }, { address: tasks[0].address, protocol: 'udp', port: target }]);
    expect(reports.get('n3')?.flowsEnded).toBeGreaterThanOrEqual(onT1);
    const echoes = [];
    for (const id of ids) echoes.push((await w('client').ask({ op: 'echo', id, timeoutMs: 2000 })).ok === true);
    // The connections on t1 are over (their next packet meets t2, which knows nothing of them); those on t2 go on.
    expect(echoes.filter((ok) => !ok).length).toBe(onT1);
    expect(echoes.filter((ok) => ok).length).toBe(ids.length - onT1);

    for (const n of nodes) for (let i = 0; i < 3; i++) expect(await w('client').reaches(n.lan, published), `client → ${n.name} after`).toBe(true);
    const t1Before = await udpCount('t1');
    const t2Before = await udpCount('t2');
    for (let i = 0; i < 12; i++) await w('client').ask({ op: 'udp', host: nodes[0].lan, port: published, count: 1, gapMs: 0 });
    await new Promise((r) => setTimeout(r, 200));
    expect(await udpCount('t1')).toBe(t1Before);
    expect(await udpCount('t2') - t2Before).toBe(12);
  }, 60_000);

  it('preferLocal: a node with a task sends the port to it alone, and the task sees the client\'s address; a node without one spreads', async () => {
    await applyAll(tasks.map((t) => t.address), true);
    const client = '192.168.77.100';
    for (const [node, task, other] of [[nodes[0], 't1', 't2'], [nodes[1], 't2', 't1']] as const) {
      const before = { mine: (await peers(task)).length, other: (await peers(other)).length };
      for (let i = 0; i < 8; i++) expect(await w('client').reaches(node.lan, published), `client → ${node.name}`).toBe(true);
      const seen = await peersAfter(task, before.mine, 8);
      // Every connection reached this node's task, from the client's own address (no SNAT).
      expect(seen, `${task} through ${node.name}`).toEqual(Array.from({ length: 8 }, () => client));
      expect((await peers(other)).length, `${other} through ${node.name}`).toBe(before.other);
    }
    // n3 runs no task: it spreads over both, SNATed to its own ingress address as before.
    const from = { t1: (await peers('t1')).length, t2: (await peers('t2')).length };
    for (let i = 0; i < 24 && ((await peers('t1')).length === from.t1 || (await peers('t2')).length === from.t2); i++) {
      expect(await w('client').reaches(nodes[2].lan, published)).toBe(true);
    }
    const viaN3 = [...(await peers('t1')).slice(from.t1), ...(await peers('t2')).slice(from.t2)];
    expect(new Set(viaN3)).toEqual(new Set([nodes[2].gateway]));
    expect((await peers('t1')).length).toBeGreaterThan(from.t1);
    expect((await peers('t2')).length).toBeGreaterThan(from.t2);
    // And the preference ends with the local task: once t1 is no backend, n1 forwards to t2 (SNATed).
    await applyAll([tasks[1].address], true);
    const t2From = (await peers('t2')).length;
    for (let i = 0; i < 3; i++) expect(await w('client').reaches(nodes[0].lan, published)).toBe(true);
    expect(await peersAfter('t2', t2From, 3)).toEqual([nodes[0].gateway, nodes[0].gateway, nodes[0].gateway]);
  }, 60_000);
});
