// Cutting one node of a real process cluster off from the others, with iptables, for the system
// tests (the cluster started with `ownHosts`: each node on its own loopback address, which it also
// dials its peers from). Both functions return the heal, which removes exactly what they added.
//
// cutPeers drops the peer links only (Raft, the lease): the node's own API calls to the others
// still pass, as does the test's. cutOff also drops the node's calls to the others' APIs (a
// replicated volume's increments go there, over the mesh): those leave from 127.0.0.1 like the
// test's own, so they are told apart by the socket's cgroup (the node's process moved into a
// cgroup v2 group of its own, matched with `-m cgroup --path`), and the connections it already
// had open are closed with `ss -K`. Root and iptables (docker.io brings it); run under the
// machine-wide lock, like every system test.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ClusterNode } from '../cluster/process-cluster.ts';

export const portOf = (address: string): number => Number(address.slice(address.lastIndexOf(':') + 1));
export const hostOf = (address: string): string => address.slice(0, address.lastIndexOf(':'));

/** The cgroup v2 hierarchy: on its own, or beside v1 controllers (a "hybrid" machine). */
const cgroupRoots = ['/sys/fs/cgroup/unified', '/sys/fs/cgroup'];

function iptables(args: string[]): void {
  const r = spawnSync('iptables', args);
  if (r.status !== 0) throw new Error(`iptables ${args.join(' ')}: ${r.stderr.toString()}`);
}

/** Inserts the rules; on a failure removes those already added and throws. Returns the heal. */
function insertRules(rules: string[][]): () => void {
  const added: string[][] = [];
  const heal = (): void => { for (const rule of added) spawnSync('iptables', ['-D', ...rule]); };
  for (const rule of rules) {
    try {
      iptables(['-I', ...rule]);
    } catch (err) {
      heal();
      throw err;
    }
    added.push(rule);
  }
  return heal;
}

/**
 * Cuts the victim's peer links: `in`, what the others send it; `out`, what it sends them. The
 * client APIs stay open, so the test still reads every node. Returns the heal.
 */
export function cutPeers(nodes: readonly ClusterNode[], victim: ClusterNode, ways: { in: boolean; out: boolean }): () => void {
  const others = nodes.filter((n) => n !== victim).map((n) => String(portOf(n.peerAddress)));
  const rules: string[][] = [];
  if (ways.in) rules.push(['OUTPUT', '-p', 'tcp', '-d', hostOf(victim.peerAddress), '--dport', String(portOf(victim.peerAddress)), '-j', 'DROP']);
  if (ways.out) rules.push(['OUTPUT', '-p', 'tcp', '-s', hostOf(victim.peerAddress), '-m', 'multiport', '--dports', others.join(','), '-j', 'DROP']);
  return insertRules(rules);
}

/** The v2 hierarchy's root on this machine. */
function cgroupRoot(): string {
  const root = cgroupRoots.find((r) => existsSync(path.join(r, 'cgroup.procs')) && !existsSync(path.join(r, 'tasks')));
  if (root === undefined) throw new Error(`no cgroup v2 hierarchy at ${cgroupRoots.join(' or ')}: cutOff needs one to tell the node's own connections apart`);
  return root;
}

/** Closes the TCP connections process `pid` holds to any of `ports`, established or being opened (ss -K). */
function closeConnections(pid: number, ports: readonly number[]): void {
  const filter = `( ${ports.map((p) => `dport = :${p}`).join(' or ')} )`;
  const r = spawnSync('ss', ['-tnpH', 'state', 'connected', filter], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ss: ${r.stderr}`);
  for (const line of r.stdout.split('\n')) {
    if (!line.includes(`pid=${pid},`)) continue;
    // State, Recv-Q, Send-Q, local address:port, peer address:port, process.
    const [local, peer] = line.trim().split(/\s+/).filter((t) => /^[^(]*:\d+$/.test(t));
    if (local === undefined || peer === undefined) continue;
    const k = spawnSync('ss', ['-K', '-tn', 'src', local, 'dst', peer], { encoding: 'utf8' });
    if (k.status !== 0) throw new Error(`ss -K src ${local} dst ${peer}: ${k.stderr}`);
  }
}

/**
 * The victim cut off from the others both ways, as a partition would: its peer links, and the
 * calls it makes to their APIs (increments, forwards to the leader). What the others send to its
 * API still passes (the test reads it too). Returns the heal.
 */
export function cutOff(nodes: readonly ClusterNode[], victim: ClusterNode): () => void {
  const pid = victim.proc?.pid;
  if (pid === undefined) throw new Error(`${victim.name} is not running`);
  const root = cgroupRoot();
  const group = `shoal-cut-${process.pid}-${victim.name}`;
  const dir = path.join(root, group);
  const apiPorts = nodes.filter((n) => n !== victim).map((n) => portOf(n.apiAddress));
  const healPeers = cutPeers(nodes, victim, { in: true, out: true });
  let healApi = (): void => undefined;
  const heal = (): void => {
    healApi();
    healPeers();
    // Back to the root group, the node and any program it started meanwhile (a process gone has
    // left it already), then the group removed.
    let inGroup: string[] = [String(pid)];
    try { inGroup = [...inGroup, ...readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter((l) => l !== '')]; } catch { /* never made */ }
    for (const p of new Set(inGroup)) {
      try { writeFileSync(path.join(root, 'cgroup.procs'), p); } catch { /* the process is gone */ }
    }
    try { rmdirSync(dir); } catch { /* never made, or already removed */ }
  };
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
    healApi = insertRules([['OUTPUT', '-p', 'tcp', '-m', 'cgroup', '--path', group, '-m', 'multiport', '--dports', apiPorts.join(','), '-j', 'DROP']]);
    // Sockets keep the group they were made in: those opened before the move are closed.
    closeConnections(pid, apiPorts);
  } catch (err) {
    heal();
    throw err;
  }
  return heal;
}
