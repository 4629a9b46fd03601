// Child processes of a benchmark run: spawned with their output in a log file (no pipe for this
// process to drain while it generates load), tracked so that every one of them is killed when
// the run ends however it ends, and measured through /proc.

import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';

const running = new Set<ChildProcess>();
const tempDirs = new Set<string>();

/** A temporary directory to delete if the run is interrupted before its owner cleans up. */
export function trackTempDir(dir: string): void {
  tempDirs.add(dir);
}

/**
 * Kills what is still running, waits (asynchronously: tsx's signal relay needs the event loop)
 * for the processes to be gone, then deletes the tracked temporary directories. For Ctrl-C.
 */
export async function abandonAll(): Promise<void> {
  const exits = [...running].map((p) => new Promise<void>((resolve) => {
    if (p.exitCode !== null || p.signalCode !== null) resolve();
    else p.once('exit', () => resolve());
  }));
  killAllStarted();
  await Promise.race([Promise.all(exits), new Promise((r) => setTimeout(r, 3000))]);
  for (const d of tempDirs) {
    try {
      rmSync(d, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      console.error(`could not delete ${d}: ${(err as Error).message}`);
    }
  }
  tempDirs.clear();
}

/**
 * On Ctrl-C or SIGTERM: kill every started process, delete the tracked directories, exit 130.
 * `on`, not `once`: Ctrl-C reaches this process twice (from the terminal and relayed by tsx),
 * and the second must not kill it halfway through the clean-up.
 */
export function abandonOnSignal(): void {
  let abandoning = false;
  const onSignal = (): void => {
    if (abandoning) return;
    abandoning = true;
    void abandonAll().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface Spawned {
  proc: ChildProcess;
  pid: number;
  logFile: string;
  exited: Promise<number | null>;
}

export function spawnLogged(cmd: string, args: string[], logFile: string, env: NodeJS.ProcessEnv = process.env): Spawned {
  const fd = openSync(logFile, 'a');
  const proc = spawn(cmd, args, { stdio: ['ignore', fd, fd], env });
  closeSync(fd);
  if (proc.pid === undefined) throw new Error(`could not start ${cmd}`);
  running.add(proc);
  const exited = new Promise<number | null>((resolve) => {
    proc.once('exit', (code, signal) => {
      running.delete(proc);
      resolve(code ?? (signal ? -1 : null));
    });
    proc.once('error', () => {
      running.delete(proc);
      resolve(-1);
    });
  });
  return { proc, pid: proc.pid, logFile, exited };
}

/** Sends `signal` and waits for the exit; escalates to SIGKILL after `graceMs`. */
export async function stopProcess(s: Spawned, signal: NodeJS.Signals = 'SIGTERM', graceMs = 15_000): Promise<void> {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null) return;
  s.proc.kill(signal);
  const timer = setTimeout(() => s.proc.kill('SIGKILL'), graceMs);
  await s.exited;
  clearTimeout(timer);
}

/** Kills every process this run started that is still alive (the run's last line of defence). */
export function killAllStarted(): void {
  for (const proc of running) proc.kill('SIGKILL');
  running.clear();
}

/** Ports this process has handed out: the kernel may offer a just-closed port again, and two nodes would collide on it. */
const handedOut = new Set<number>();

/** A loopback port free now and not handed out before by this process. */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await anyFreePort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Stops every running node (SIGTERM, then SIGKILL after the grace period) and, unless kept, removes `root`. */
export async function stopAllAndRemove(nodes: readonly { proc: Spawned | undefined }[], root: string, keepData: boolean): Promise<void> {
  await Promise.all(nodes.map(async (n) => { if (n.proc) await stopProcess(n.proc, 'SIGTERM'); }));
  if (!keepData && root) rmSync(root, { recursive: true, force: true });
}

/**
 * The index of the node that every running node names as leader: `leaderSeenBy` asks a node whom
 * it follows (undefined: nobody), `idOf` is the id the others name a node by. Undefined while any
 * running node knows no leader, while they disagree, or while the named leader is not running.
 */
export async function agreedLeader<N extends { proc: Spawned | undefined }>(
  nodes: readonly N[], leaderSeenBy: (n: N) => Promise<string | undefined>, idOf: (n: N) => string,
): Promise<number | undefined> {
  const seen = new Set<string>();
  for (const n of nodes) {
    if (!n.proc) continue;
    const leader = await leaderSeenBy(n);
    if (leader === undefined) return undefined;
    seen.add(leader);
  }
  const [id] = [...seen];
  if (seen.size !== 1) return undefined;
  const i = nodes.findIndex((n) => idOf(n) === id);
  return i >= 0 && nodes[i]?.proc ? i : undefined;
}

/** Resident set size in MiB (VmRSS of /proc/<pid>/status). */
export function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m?.[1]) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}

/** Where a process's resident memory lies, by kind of mapping (MiB), from /proc/PID/smaps. */
export interface MemoryMap {
  /** The C library's main heap (brk: `[heap]`): malloc of the main thread, Node's and OpenSSL's small blocks. */
  brkHeap: number;
  /** Anonymous mappings starting on a 64 MiB boundary: the C library's per-thread arenas. */
  threadArenas: number;
  /** Other anonymous mappings: V8's heap pages and code, and blocks malloc maps by themselves (large buffers). */
  otherAnonymous: number;
  /** Mapped files: the node binary, shared libraries. */
  files: number;
  /** Thread stacks and the rest. */
  other: number;
}

export function memoryMap(pid: number): MemoryMap {
  const out: MemoryMap = { brkHeap: 0, threadArenas: 0, otherAnonymous: 0, files: 0, other: 0 };
  let kind: keyof MemoryMap = 'other';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-[0-9a-f]+ \S+ \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head) {
      const [, start = '0', inode = '0', name = ''] = head;
      if (name === '[heap]') kind = 'brkHeap';
      else if (inode !== '0') kind = 'files';
      else if (name === '') kind = BigInt(`0x${start}`) % (64n << 20n) === 0n ? 'threadArenas' : 'otherAnonymous';
      else kind = 'other';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss?.[1]) out[kind] += Number(rss[1]) / 1024;
  }
  return out;
}

/** CPU time (user + system) a process has used so far, in ms (NaN once it is gone). Assumes USER_HZ = 100, as on Linux x86-64. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return Number.NaN;
  }
}

/** Busy and total jiffies of the whole machine, to tell how loaded it was while a figure was taken. */
export function machineJiffies(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

export async function waitUntil(what: string, cond: () => Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond().catch(() => false)) return;
    await sleep(everyMs);
  }
  throw new Error(`${what}: not reached within ${timeoutMs} ms`);
}

/** What waitCaughtUp reads of a cluster: each node's applied index, and which node leads. */
export interface AppliedView {
  appliedOf(i: number): Promise<number>;
  leader(): Promise<number | undefined>;
}

/** Polls until node i applied as far as the leader (another node); calls `answered` on each answer of node i. */
export async function waitCaughtUp(what: string, view: AppliedView, i: number, timeoutMs: number, answered: () => void): Promise<void> {
  await waitUntil(what, async () => {
    const mine = await view.appliedOf(i);
    answered();
    const l = await view.leader();
    if (l === undefined || l === i) return false;
    return mine > 0 && mine >= (await view.appliedOf(l));
  }, timeoutMs, 25);
}
