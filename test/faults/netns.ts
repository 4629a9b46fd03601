// A private network for fault tests: one Linux bridge in the root namespace and one network
// namespace per node, each joined to the bridge by a veth pair, plus nftables rules inside the
// namespaces that drop chosen links. Needs root, `ip` (iproute2) and `nft` (nftables).
//
//   root namespace: shoalbr<k>  10.213.<k>.254/24   (the test's clients talk to nodes from here)
//   shoal-<k>-n<i>: eth0        10.213.<k>.<i>/24   (node i; lo up; no route anywhere else)
//
// Traffic never leaves the bridge: the namespaces have no default route and the bridge has no
// uplink. The lab index k is claimed with a lock file holding the owner's pid, so concurrent
// runs get different subnets and a run that starts after a crash removes what the dead owner
// left behind (namespaces, their processes, the bridge).
//
// Docker, when its daemon runs on the same machine, sets the iptables FORWARD policy to DROP and
// loads br_netfilter, which sends bridged frames through iptables: node-to-node traffic across
// the lab's bridge would be dropped (no leader is ever elected). Each lab therefore inserts one
// rule in Docker's DOCKER-USER chain (Docker's place for rules of its hosts' own, evaluated
// before its own) accepting what enters and leaves its bridge, and removes it at teardown. The
// chain is created when missing, so a daemon that starts during a run finds the rule in place.
//
// Faults are cut links. A cut from A to B drops every packet A sends to B, twice over: on A's
// output (daddr B) and on B's input (saddr A), in the table `inet shoalfault` of each namespace.
// Client traffic from the root namespace (10.213.<k>.254) is never cut: like Jepsen's clients,
// ours see every node, and the nemesis cuts only node-to-node links (peer transport and the
// followers' forwarding of writes to the leader).
//
// A one-way cut of a TCP link stalls it both ways: A's segments to B are lost, so B never
// acknowledges them and A keeps retransmitting; B's segments still reach A, but a connection
// that A opens never completes its handshake. For a protocol over TCP, "one-way" therefore means
// "A's messages to B are lost while B's to A still arrive on connections that B opened", which
// is the asymmetric situation the fault is meant to create (B hears A's silence; A hears B).

import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, readlinkSync, realpathSync, statSync, unlinkSync, writeSync, closeSync } from 'node:fs';
import path from 'node:path';
import { sleep } from './http.ts';

const lockDir = '/run/shoal-faults';
const labIndexMax = 250;
const subnetPrefix = '10.213';

/** What keeps fault tests from running here, one line each; empty when they can run. */
export function prerequisiteProblems(): string[] {
  const problems: string[] = [];
  if (process.platform !== 'linux') problems.push(`fault tests need Linux network namespaces; this is ${process.platform}`);
  if (process.getuid?.() !== 0) problems.push('fault tests must run as root (they create network namespaces, a bridge and nftables rules)');
  const install = 'install it: apt-get install -y iproute2 nftables (.ci/run does this)';
  if (spawnSync('ip', ['-V']).status !== 0) problems.push(`the 'ip' command (iproute2) is missing; ${install}`);
  if (spawnSync('nft', ['--version']).status !== 0) problems.push(`the 'nft' command (nftables) is missing; ${install}`);
  return problems;
}

/** A link to drop: every packet from node `from` to node `to` (1-based node numbers). */
export interface Cut {
  from: number;
  to: number;
}

/** Cuts between every node of `a` and every node of `b`, both ways. Nodes in neither keep all
 *  their links, so leaving a node out of both sides makes it a bridge that sees both. */
export function cutsBetween(a: readonly number[], b: readonly number[]): Cut[] {
  const cuts: Cut[] = [];
  for (const x of a) for (const y of b) if (x !== y) cuts.push({ from: x, to: y }, { from: y, to: x });
  return cuts;
}

/** Runs a command; rejects with its stderr when it fails. */
function run(cmd: string, args: readonly string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout?.on('data', (b: Buffer) => { out += b.toString(); });
    child.stderr?.on('data', (b: Buffer) => { err += b.toString(); });
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} failed (exit ${code}): ${err.trim()}`));
    });
    if (child.stdin) {
      // A command that fails early closes its stdin; its exit status tells why, not the EPIPE.
      child.stdin.on('error', () => undefined);
      child.stdin.end(input);
    }
  });
}

/** Synchronous and silent: for cleanup, where a missing namespace is not an error. */
export function runQuiet(cmd: string, args: readonly string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? r.stdout : '';
}

/** Whether a process with this pid exists (EPERM: it does, owned by someone else). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const lockPath = (k: number): string => path.join(lockDir, `lab-${k}.pid`);
const bridgeName = (k: number): string => `shoalbr${k}`;
const nsName = (k: number, i: number): string => `shoal-${k}-n${i}`;
const vethName = (k: number, i: number): string => `shoal${k}v${i}`;

const dockerUserChain = 'DOCKER-USER';
/** Lab k's rule in DOCKER-USER (without the -I/-D verb): accept its bridged traffic. */
const dockerUserRule = (k: number): string[] => [
  dockerUserChain, '-i', bridgeName(k), '-o', bridgeName(k), '-m', 'comment', '--comment', `shoal-fault-lab-${k}`, '-j', 'ACCEPT',
];

/** `iptables -w` (waits for the xtables lock Docker also takes); false when it fails or is absent. */
function iptablesSync(args: readonly string[]): boolean {
  return spawnSync('iptables', ['-w', '5', ...args], { stdio: 'ignore' }).status === 0;
}

/** Lets the lab's bridged traffic through Docker's FORWARD policy. No iptables: no Docker, nothing to do. */
function acceptBridgeInDockerUser(k: number): void {
  if (spawnSync('iptables', ['--version'], { stdio: 'ignore' }).status !== 0) return;
  if (!iptablesSync(['-S', dockerUserChain]) && !iptablesSync(['-N', dockerUserChain])) {
    throw new Error(`could not create the iptables chain ${dockerUserChain}`);
  }
  if (!iptablesSync(['-C', ...dockerUserRule(k)]) && !iptablesSync(['-I', ...dockerUserRule(k)])) {
    throw new Error(`could not add the fault lab's rule to iptables ${dockerUserChain}`);
  }
}

function removeDockerUserRuleSync(k: number): void {
  for (let i = 0; i < 10 && iptablesSync(['-D', ...dockerUserRule(k)]); i++) { /* until none is left */ }
}

/** Kills every process in lab k's namespaces and deletes the namespaces, the bridge, its iptables rule and the lock. */
function removeLabSync(k: number): void {
  const prefix = `shoal-${k}-n`;
  for (const ns of listNamespaces().filter((n) => n.startsWith(prefix))) {
    for (const pid of runQuiet('ip', ['netns', 'pids', ns]).split(/\s+/).filter(Boolean)) {
      try { process.kill(Number(pid), 'SIGKILL'); } catch { /* already gone */ }
    }
    runQuiet('ip', ['netns', 'del', ns]);
  }
  runQuiet('ip', ['link', 'del', bridgeName(k)]);
  removeDockerUserRuleSync(k);
  try { unlinkSync(lockPath(k)); } catch { /* not there */ }
}

function listNamespaces(): string[] {
  return runQuiet('ip', ['netns', 'list']).split('\n').map((l) => l.split(' ')[0] ?? '').filter((n) => n.startsWith('shoal-'));
}

function lockOwner(k: number): number | undefined {
  try {
    const pid = Number(readFileSync(lockPath(k), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

let keepOwnLabs = false;

/** This process runs several labs at once (bench/swarm.ts): a new lab leaves this process's live labs alone. */
export function keepOwnLiveLabs(): void {
  keepOwnLabs = true;
}

/** Removes the labs of runs that died without cleaning up: those whose lock's pid is gone. */
export function removeStaleLabs(): number[] {
  const found = new Set<number>();
  for (const ns of listNamespaces()) {
    const m = /^shoal-(\d+)-n\d+$/.exec(ns);
    if (m) found.add(Number(m[1]));
  }
  for (const line of runQuiet('ip', ['-o', 'link', 'show', 'type', 'bridge']).split('\n')) {
    const m = /^\d+: shoalbr(\d+)[:@]/.exec(line);
    if (m) found.add(Number(m[1]));
  }
  for (const line of runQuiet('iptables', ['-w', '5', '-S', dockerUserChain]).split('\n')) {
    const m = /--comment "?shoal-fault-lab-(\d+)"? /.exec(line);
    if (m) found.add(Number(m[1]));
  }
  const removed: number[] = [];
  for (const k of found) {
    const owner = lockOwner(k);
    if (owner !== undefined && owner !== process.pid && pidAlive(owner)) continue;
    // A lab of this very process, still in use, when the process asked for several at once
    // (bench/swarm.ts). Otherwise a lab this process left behind is removed, as before: the test
    // run reuses one process for many files (CI failed with the leftovers kept).
    if (keepOwnLabs && owner === process.pid && [...liveLabs].some((l) => l.index === k)) continue;
    removeLabSync(k);
    removed.push(k);
  }
  return removed;
}

/** Claims a free lab index: one with no live lock and no address of its subnet on this host. */
function claimIndex(): number {
  mkdirSync(lockDir, { recursive: true });
  const used = runQuiet('ip', ['-4', '-o', 'addr', 'show']);
  for (let k = 1; k <= labIndexMax; k++) {
    if (used.includes(` ${subnetPrefix}.${k}.`)) continue;
    let fd: number;
    try {
      fd = openSync(lockPath(k), 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = lockOwner(k);
      if (owner !== undefined && pidAlive(owner)) continue;
      removeLabSync(k);
      try { fd = openSync(lockPath(k), 'wx'); } catch { continue; }
    }
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    return k;
  }
  throw new Error(`no free fault-test lab index in 1..${labIndexMax}; see ${lockDir}`);
}

const liveLabs = new Set<NetLab>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Runs on every exit, a failing test or an uncaught error included: nothing may outlive us.
  process.on('exit', () => {
    for (const lab of liveLabs) lab.destroySync();
  });
}

export class NetLab {
  readonly bridge: string;
  /** The root namespace's address on the bridge: where the clients' packets come from. */
  readonly hostIp: string;
  private readonly applied = new Map<number, string>();
  private cuts: Cut[] = [];
  private destroyed = false;

  private constructor(readonly index: number, readonly nodeCount: number) {
    this.bridge = bridgeName(index);
    this.hostIp = `${subnetPrefix}.${index}.254`;
  }

  /** Creates the bridge and `nodeCount` namespaces, after removing stale labs of dead runs. */
  static async create(nodeCount: number): Promise<NetLab> {
    if (nodeCount < 1 || nodeCount > 200) throw new RangeError(`nodeCount ${nodeCount} must be in 1..200`);
    const problems = prerequisiteProblems();
    if (problems.length > 0) throw new Error(`cannot build the fault-test network:\n  ${problems.join('\n  ')}`);
    removeStaleLabs();
    const lab = new NetLab(claimIndex(), nodeCount);
    liveLabs.add(lab);
    installExitHook();
    try {
      await lab.build();
    } catch (err) {
      lab.destroySync();
      throw err;
    }
    return lab;
  }

  ns(i: number): string {
    this.checkNode(i);
    return nsName(this.index, i);
  }

  ip(i: number): string {
    this.checkNode(i);
    return `${subnetPrefix}.${this.index}.${i}`;
  }

  /** The root namespace's end of node i's veth pair (its port on the bridge). */
  hostVeth(i: number): string {
    this.checkNode(i);
    return vethName(this.index, i);
  }

  /** Replaces the set of cut links; namespaces whose rules change are rewritten atomically. */
  async setCuts(cuts: readonly Cut[]): Promise<void> {
    for (const c of cuts) {
      this.checkNode(c.from);
      this.checkNode(c.to);
    }
    this.cuts = [...cuts];
    const writes: Promise<void>[] = [];
    for (let i = 1; i <= this.nodeCount; i++) {
      const rules = this.ruleset(i);
      if (this.applied.get(i) === rules) continue;
      writes.push(run('ip', ['netns', 'exec', this.ns(i), 'nft', '-f', '-'], rules).then(() => { this.applied.set(i, rules); }));
    }
    await Promise.all(writes);
  }

  currentCuts(): readonly Cut[] {
    return this.cuts;
  }

  heal(): Promise<void> {
    return this.setCuts([]);
  }

  /**
   * Starts `argv` inside node i's namespace through `ip netns exec`, which execs (no fork), so
   * the child's pid is the program's own: signals sent to it (SIGKILL, SIGSTOP) reach the program.
   * `started` resolves once that is verified (its executable and its network namespace).
   */
  spawnIn(i: number, argv: readonly string[], opts: { cwd: string; stdio: StdioOptions }): { child: ChildProcess; started: Promise<void> } {
    const [cmd, ...args] = argv;
    if (cmd === undefined) throw new Error('spawnIn: empty argv');
    const child = spawn('ip', ['netns', 'exec', this.ns(i), cmd, ...args], { cwd: opts.cwd, stdio: opts.stdio });
    return { child, started: this.verifyExec(child, cmd, i) };
  }

  /** Kills what runs in the namespaces and deletes them and the bridge. Idempotent. */
  async destroy(): Promise<void> {
    this.destroySync();
  }

  destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    liveLabs.delete(this);
    removeLabSync(this.index);
  }

  private async build(): Promise<void> {
    await run('ip', ['link', 'add', this.bridge, 'type', 'bridge']);
    await run('ip', ['addr', 'add', `${this.hostIp}/24`, 'dev', this.bridge]);
    await run('ip', ['link', 'set', this.bridge, 'up']);
    acceptBridgeInDockerUser(this.index);
    for (let i = 1; i <= this.nodeCount; i++) {
      const ns = this.ns(i);
      const veth = vethName(this.index, i);
      await run('ip', ['netns', 'add', ns]);
      await run('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      await run('ip', ['link', 'set', veth, 'master', this.bridge, 'up']);
      await run('ip', ['-n', ns, 'addr', 'add', `${this.ip(i)}/24`, 'dev', 'eth0']);
      await run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    }
    await this.setCuts([]);
  }

  /** Node i's table: drop what its cut peers send it, and what it sends to peers it is cut from. */
  private ruleset(i: number): string {
    const from = this.cuts.filter((c) => c.to === i).map((c) => this.ip(c.from));
    const to = this.cuts.filter((c) => c.from === i).map((c) => this.ip(c.to));
    const set = (ips: string[]): string => `{ ${[...new Set(ips)].sort().join(', ')} }`;
    return [
      // Declaring, deleting and re-declaring the table in one transaction replaces it atomically.
      'table inet shoalfault',
      'delete table inet shoalfault',
      'table inet shoalfault {',
      '  chain input {',
      '    type filter hook input priority 0; policy accept;',
      ...(from.length > 0 ? [`    ip saddr ${set(from)} drop`] : []),
      '  }',
      '  chain output {',
      '    type filter hook output priority 0; policy accept;',
      ...(to.length > 0 ? [`    ip daddr ${set(to)} drop`] : []),
      '  }',
      '}',
      '',
    ].join('\n');
  }

  private async verifyExec(child: ChildProcess, cmd: string, i: number): Promise<void> {
    const pid = child.pid;
    if (pid === undefined) throw new Error(`could not start ${cmd} in ${this.ns(i)}`);
    const want = realpathSync(cmd);
    const nsInode = statSync(`/run/netns/${this.ns(i)}`).ino;
    for (let tries = 0; tries < 200; tries++) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${cmd} in ${this.ns(i)} exited at once (${child.exitCode ?? child.signalCode})`);
      }
      let exe = '';
      let netns = '';
      try {
        exe = readlinkSync(`/proc/${pid}/exe`);
        netns = readlinkSync(`/proc/${pid}/ns/net`);
      } catch {
        // exiting, or not visible yet
      }
      if (exe === want && netns === `net:[${nsInode}]`) return;
      await sleep(10);
    }
    throw new Error(`pid ${pid} did not become ${want} in namespace ${this.ns(i)}: 'ip netns exec' may fork here; signals would miss the program`);
  }

  private checkNode(i: number): void {
    if (!Number.isInteger(i) || i < 1 || i > this.nodeCount) throw new RangeError(`node ${i} is not in 1..${this.nodeCount}`);
  }
}
