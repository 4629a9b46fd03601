// The `shoal dev` supervisor: runs each node as a child process (`shoal serve`), restarts one on
// request, stops them all, and says how each one ended ("exited with code 8 (an address cannot
// be bound)", "was killed by SIGKILL"). A node that dies on its own is reported and left down;
// the others keep running, and `shoal dev restart NAME` starts it again; one that exits asking to
// be restarted (exit code 10, a drill's kill) is started again at once.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MemberRecord } from '../resources/membership.ts';
import { exitCodes } from './args.ts';
import { CliFailure, send } from './client.ts';
import { supervisedEnv } from './serve.ts';
import { allocatorEnvironment, findJemalloc } from './node-environment.ts';

/** A node asked to stop that has not exited in this long is killed. */
const stopGraceMs = 15_000;
/** A (re)started node whose API has not answered as itself in this long is reported. */
const upTimeoutMs = 20_000;
const pollMs = 200;

const binPath = findBin();

/** bin/shoal.js of this package, found from this module (a source file, or the dist bundle). */
function findBin(): string {
  const here = fileURLToPath(import.meta.url);
  for (let dir = path.dirname(here), up = 0; up < 4; dir = path.dirname(dir), up++) {
    const candidate = path.join(dir, 'bin', 'shoal.js');
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`cannot find bin/shoal.js above ${here}`);
}

const exitMeanings: Record<number, string> = {
  [exitCodes.failed]: 'crashed', [exitCodes.usage]: 'invalid config', [exitCodes.corrupt]: 'data corruption',
  [exitCodes.removed]: 'removed from the cluster', [exitCodes.upgradeRequired]: 'upgrade required',
  [exitCodes.storageFormat]: 'unknown storage format', [exitCodes.addressInUse]: 'an address cannot be bound', [exitCodes.joinFailed]: 'the join failed', [exitCodes.restartRequested]: 'asked to be restarted',
};

/** How a child ended, in words: a signal is said as such, never as "code null". */
export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal !== null) return `was killed by ${signal}`;
  const meaning = code === null ? undefined : exitMeanings[code];
  return `exited with code ${code ?? 'unknown'}${meaning !== undefined ? ` (${meaning})` : ''}`;
}

export interface DevNode extends MemberRecord {
  dir: string;
}

/** What the supervisor tells the user: text lines, or with --json one event object per line. */
export type DevEvent =
  | { event: 'exited'; node: string; id: string; pid: number | null; code: number | null; signal: string | null; message: string }
  | { event: 'restarted'; node: string; id: string; pid: number | null; api: string; message: string };

interface Slot {
  node: DevNode;
  child: ChildProcess | undefined;
  /** Resolves when the current child has exited. */
  exited: Promise<void>;
  /** The exit was asked for (restart or stop): not reported as a failure. */
  expected: boolean;
}

export class DevSupervisor {
  private readonly slots = new Map<string, Slot>();
  private stopping = false;
  /** Nodes that, asked to stop, did not exit cleanly. */
  private unclean = 0;
  private resolveDone: (code: number) => void = () => {};
  /** Resolves with the exit code of `shoal dev` once every node is down. */
  readonly done = new Promise<number>((resolve) => { this.resolveDone = resolve; });
  /**
   * The allocator every node runs with (src/cli/node-environment.ts): jemalloc when installed, as
   * the unit of `shoal install` does, unless LD_PRELOAD is set already. NODE_OPTIONS stay the caller's.
   */
  private readonly allocator = (process.env.LD_PRELOAD ?? '') !== '' ? {} : allocatorEnvironment('auto', findJemalloc());

  /**
   * `restartFlags`: what `shoal dev restart NODE` needs after it to reach this supervisor (its
   * `--data DIR` when not the default: dev-lock.ts, dataFlag), so the hint printed when a node
   * dies works as printed.
   */
  constructor(nodes: DevNode[], private readonly emit: (e: DevEvent) => void, private readonly logsTo: NodeJS.WriteStream,
    private readonly restartFlags = '') {
    for (const node of nodes) this.slots.set(node.name, { node, child: undefined, exited: Promise.resolve(), expected: false });
  }

  startAll(): void {
    for (const slot of this.slots.values()) this.spawn(slot);
  }

  pids(): Record<string, number | null> {
    return Object.fromEntries([...this.slots].map(([name, s]) => [name, s.child?.exitCode === null ? s.child.pid ?? null : null]));
  }

  /** The node `ref` names (name or id). */
  find(ref: string): DevNode {
    const slot = this.slots.get(ref) ?? [...this.slots.values()].find((s) => s.node.id === ref);
    if (slot === undefined) throw new CliFailure(`no node '${ref}' in this dev cluster; its nodes are ${[...this.slots.keys()].join(', ')}`, exitCodes.failed, 'not_found');
    return slot.node;
  }

  /** Stops the node (if it runs) and starts it again; resolves once its API answers as itself. */
  async restart(ref: string): Promise<DevEvent> {
    if (this.stopping) throw new CliFailure('the dev cluster is stopping', exitCodes.unavailable, 'stopping');
    const slot = this.slots.get(this.find(ref).name);
    if (slot === undefined) throw new Error('unreachable: find() returned a node without a slot');
    const before = slot.child?.pid ?? null;
    await this.stopOne(slot);
    this.spawn(slot);
    await waitUp(slot.node, upTimeoutMs);
    const pid = slot.child?.pid ?? null;
    return { event: 'restarted', node: slot.node.name, id: slot.node.id, pid, api: `https://${slot.node.apiAddress}`,
      message: `restarted ${slot.node.name} (${slot.node.id}): pid ${before ?? '-'} -> ${pid ?? '-'}, API https://${slot.node.apiAddress}` };
  }

  /** Stops every node (SIGTERM, SIGKILL after a grace period); `done` resolves afterwards. */
  async stopAll(): Promise<void> {
    if (this.stopping) return this.done.then(() => undefined);
    this.stopping = true;
    await Promise.all([...this.slots.values()].map((s) => this.stopOne(s)));
    this.resolveDone(this.unclean === 0 ? exitCodes.ok : exitCodes.failed);
  }

  private async stopOne(slot: Slot): Promise<void> {
    const child = slot.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    slot.expected = true;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), stopGraceMs);
    await slot.exited;
    clearTimeout(timer);
  }

  private spawn(slot: Slot): void {
    const { node } = slot;
    // Standard input is a pipe the node watches: if this supervisor dies, even by SIGKILL, the
    // pipe closes and the node stops, instead of holding the ports and data of the next run.
    const child = spawn(process.execPath, [binPath, 'serve', '--config', path.join(node.dir, 'shoal.yaml')], {
      stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...this.allocator, [supervisedEnv]: '1' },
    });
    slot.child = child;
    slot.expected = false;
    prefixLines(child.stdout, this.logsTo, node.name);
    prefixLines(child.stderr, process.stderr, node.name);
    slot.exited = new Promise((resolve) => child.once('exit', (code, signal) => {
      this.onExit(slot, child, code, signal);
      resolve();
    }));
  }

  private onExit(slot: Slot, child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    const asked = slot.expected;
    if (asked && (code === 0 || signal === 'SIGTERM')) return;
    // A node that asks to be restarted (a drill's kill: docs/operations.md, "Failover drills")
    // is, as systemd's unit does: the service managers agree on that exit code.
    if (!asked && !this.stopping && code === exitCodes.restartRequested) {
      this.spawn(slot);
      this.emit({ event: 'restarted', node: slot.node.name, id: slot.node.id, pid: slot.child?.pid ?? null, api: `https://${slot.node.apiAddress}`,
        message: `node ${slot.node.name} (pid ${child.pid ?? '?'}) exited asking to be restarted (code ${code}); started it again: pid ${slot.child?.pid ?? '-'}` });
      return;
    }
    if (asked) this.unclean += 1;
    const allDown = [...this.slots.values()].every((s) => s.child === undefined || s.child.exitCode !== null || s.child.signalCode !== null);
    const how = `node ${slot.node.name} (pid ${child.pid ?? '?'}) ${describeExit(code, signal)}`;
    let message: string;
    if (asked) message = `${how} while stopping`;
    else if (allDown) message = `${how}; every node is down, so shoal dev exits`;
    else message = `${how}; the other nodes keep running. Start it again with: npx shoal dev restart ${slot.node.name}${this.restartFlags}`;
    this.emit({ event: 'exited', node: slot.node.name, id: slot.node.id, pid: child.pid ?? null, code, signal, message });
    if (!this.stopping && allDown) {
      this.stopping = true;
      this.resolveDone(exitCodes.failed);
    }
  }
}

function prefixLines(stream: NodeJS.ReadableStream | null, out: NodeJS.WriteStream, name: string): void {
  let buf = '';
  stream?.on('data', (chunk: Buffer) => {
    buf += chunk.toString();
    const lines = buf.split('\n');
    buf = lines.pop() ?? '';
    for (const l of lines) out.write(`[${name}] ${l}\n`);
  });
}

/** What a node's API says of itself; undefined while it does not answer. */
export async function localView(api: string): Promise<{ node: string; leader: string | null } | undefined> {
  try {
    // Through the CLI's client: HTTPS with the credential dev wrote (dev.ts).
    const res = await send(api, '/v1/cluster', { query: { local: '' }, signal: AbortSignal.timeout(500) });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { node?: unknown; leader?: unknown };
    return typeof body.node === 'string' ? { node: body.node, leader: typeof body.leader === 'string' ? body.leader : null } : undefined;
  } catch {
    return undefined;
  }
}

/** Waits until the node's API answers as this node (not some other process on its port). */
async function waitUp(node: DevNode, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await localView(node.apiAddress))?.node === node.id) return;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  throw new CliFailure(`${node.name} was started but its API at ${node.apiAddress} did not answer within ${timeoutMs / 1000} s; see its log lines ([${node.name}])`, exitCodes.unavailable, 'timeout');
}
