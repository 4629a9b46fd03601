// The node's mesh agent: converges one WireGuard interface toward the node's applied store, and
// publishes the node's key, endpoint and what it sees of its peers in its node record.
//
// Level-triggered like the container agent (src/executor/agent.ts): a store change, the resync
// timer or the end of a failed pass only marks it dirty; a pass re-reads everything and
// converges. It acts on committed state only (the applied store), so without a quorum the
// interface keeps its last configuration. A pass that would remove or rewrite anything (a peer,
// the address) first takes a read barrier (this node has applied what the leader committed):
// after a restart, or cut off from the leader, the applied store may be older than what the
// interface already holds, and the agent then only adds, never takes away.
//
// Stopping the agent leaves the interface as it is: a restart or an upgrade of shoal does not cut
// the mesh (net/wg.ts says how a wireguard-go outlives shoal).

import type { MeshPeerStatus, NodeMesh, NodeRecord } from '../src/resources/records.ts';
import type { MeshConfig } from './mesh-config.ts';
import { additionsOnly, diffMesh, planMesh, type MeshPlan } from './mesh-plan.ts';
import type { WgInterface } from './wg.ts';
import type { WgInterfaceDump } from './wg-dump.ts';
import type { WgKeyPair } from './wg-keys.ts';
import { ShoalError } from '../src/errors.ts';
import { PassLoop, readBarrierWithin } from './pass-loop.ts';

export interface MeshView {
  /** The node records of the applied store (valid ones). */
  nodes(): Iterable<NodeRecord>;
  /** The cluster's members in the applied configuration (voters and learners). */
  members(): ReadonlySet<string>;
  /** Calls back on every store change that may concern the mesh; returns the unsubscribe. */
  subscribe(onChange: () => void): () => void;
}

export interface MeshWriter {
  /** Changes this node's `mesh` field; a compare-and-set on its record, retried on conflict. */
  updateMesh(change: (cur: NodeMesh | null) => NodeMesh | null): Promise<void>;
}

export interface MeshAgentOptions {
  self: string;
  config: MeshConfig;
  keys: WgKeyPair;
  wg: WgInterface;
  view: MeshView;
  writer: MeshWriter;
  /** Resolves once this node has applied everything the leader had committed; rejects without quorum. */
  caughtUp: () => Promise<void>;
  log: { info(msg: string): void; warn(msg: string): void; debug(msg: string): void };
}

/** After a failed pass, the next one waits this long. */
export const meshRetryMs = 2_000;
/** A read barrier that takes longer counts as no quorum for the pass. */
export const meshBarrierTimeoutMs = 5_000;

export class MeshAgent {
  private readonly loop: PassLoop;
  private interfaceReady = false;
  private unsubscribe: (() => void) | null = null;
  private readonly timers: NodeJS.Timeout[] = [];
  /** The newest plan, for naming peers in reports. */
  private plan: MeshPlan | null = null;
  /** Passes done (for tests). */
  passes = 0;
  /** The node's key pair: the configured one until a rotation replaces it. */
  private keys: WgKeyPair;
  /** A rotation asked for (`shoal node rotate-key`), done by the next pass. */
  private rotation: { pair: WgKeyPair; persist: (pair: WgKeyPair) => void; resolve: () => void; reject: (err: Error) => void } | null = null;

  constructor(private readonly opts: MeshAgentOptions) {
    this.keys = opts.keys;
    this.loop = new PassLoop({ name: 'mesh', pass: () => this.pass(), retryMs: meshRetryMs, log: opts.log });
  }

  /** The public key the node uses now. */
  get publicKey(): string {
    return this.keys.publicKey;
  }

  /**
   * Replaces the node's key pair with `pair`: the new public key is committed to the node's
   * record first (so a rotation without quorum changes nothing and says so), then `persist`
   * writes the private key, then the interface takes it. Peers take the new public key from the
   * record; until each has, its handshakes with this node fail (a second or two). Runs in the
   * pass loop, so no pass publishes the old key meanwhile. A crash between the steps leaves the
   * old key in the file, which the next start publishes again.
   */
  rotateKey(pair: WgKeyPair, persist: (pair: WgKeyPair) => void): Promise<void> {
    if (this.loop.closed) return Promise.reject(new ShoalError('stopping', 'the mesh agent is stopping'));
    if (this.rotation !== null) return Promise.reject(new ShoalError('resource_in_use', 'a key rotation of this node is already under way; retry when it has ended'));
    return new Promise<void>((resolve, reject) => {
      this.rotation = { pair, persist, resolve, reject };
      this.mark();
    });
  }

  /**
   * The pending rotation, first thing in a pass; its failure fails the rotation, not the pass.
   * Returns what answers the caller once the pass has given the interface the new key.
   */
  private async rotate(): Promise<(() => void) | undefined> {
    const r = this.rotation;
    if (r === null) return undefined;
    this.rotation = null;
    try {
      await this.writeKey(r.pair.publicKey);
      r.persist(r.pair);
    } catch (err) {
      r.reject(err instanceof Error ? err : new Error(String(err)));
      return undefined;
    }
    this.keys = r.pair;
    this.opts.log.info(`mesh: rotated this node's WireGuard key to ${r.pair.publicKey.slice(0, 8)}…`);
    return r.resolve;
  }

  start(): void {
    this.unsubscribe = this.opts.view.subscribe(() => this.mark());
    this.timers.push(setInterval(() => this.mark(), this.opts.config.resyncIntervalMs));
    this.timers.push(setInterval(() => { void this.report(); }, this.opts.config.reportIntervalMs));
    for (const t of this.timers) t.unref();
    this.mark();
  }

  /** Stops converging and reporting; the interface stays as it is. Idempotent. */
  async close(): Promise<void> {
    const stopped = this.loop.close();
    this.rotation?.reject(new ShoalError('stopping', 'the mesh agent stopped before the key rotation'));
    this.rotation = null;
    this.unsubscribe?.();
    for (const t of this.timers) clearInterval(t);
    await stopped;
  }

  /** Waits until no pass runs (tests). */
  idle(): Promise<void> {
    return this.loop.idle();
  }

  private mark(): void {
    this.loop.mark();
  }

  private async pass(): Promise<void> {
    this.passes++;
    // Committed and stored: the caller hears once the interface has it too (or the pass failed,
    // and a later one gives it; the record and the file hold the new key either way).
    const rotated = await this.rotate();
    try {
      await this.converge();
    } finally {
      rotated?.();
    }
  }

  private async converge(): Promise<void> {
    const { wg, config } = this.opts;
    const keys = this.keys;
    if (!this.interfaceReady) {
      const origin = await wg.ensure();
      await wg.up(config.mtu);
      this.interfaceReady = true;
      this.opts.log.info(`mesh: interface ${wg.name} ${origin === 'adopted' ? 'adopted as it was' : `created (${origin})`}`);
    }
    await this.publish();
    const plan = planMesh(this.opts.view.nodes(), this.opts.view.members(), this.opts.self, keys.privateKey, config);
    this.plan = plan;
    const current = await wg.show();
    const addresses = await wg.addresses();
    const diff = diffMesh(plan.config, keys.publicKey, current);
    const staleAddresses = addresses.filter((a) => a !== plan.address);
    const takesAway = diff.removed.length > 0 || diff.changed.length > 0 || staleAddresses.length > 0;
    const scope = takesAway && !(await this.barrier()) ? 'additions' : 'all';
    if (scope === 'additions') {
      if (diff.added.length > 0 || diff.interfaceChanged) await wg.sync(additionsOnly(plan.config, current));
    } else if (diff.added.length > 0 || diff.changed.length > 0 || diff.removed.length > 0 || diff.interfaceChanged) {
      await wg.sync(plan.config);
      this.logChanges(diff, plan);
    }
    if (plan.address !== null && !addresses.includes(plan.address)) {
      await wg.addAddress(plan.address);
      this.opts.log.info(`mesh: ${wg.name} has the address ${plan.address}`);
    }
    if (scope === 'all') for (const a of staleAddresses) await wg.removeAddress(a);
  }

  private logChanges(diff: ReturnType<typeof diffMesh>, plan: MeshPlan): void {
    const name = (k: string): string => plan.nodeByKey.get(k) ?? `key ${k.slice(0, 8)}…`;
    const parts = [
      ...diff.added.map((p) => `+${name(p.publicKey)}`), ...diff.changed.map((p) => `~${name(p.publicKey)}`), ...diff.removed.map((k) => `-${k.slice(0, 8)}…`),
    ];
    if (parts.length > 0) this.opts.log.info(`mesh: peers of ${this.opts.wg.name} now ${plan.config.peers.length} (${parts.join(' ')})`);
  }

  private async barrier(): Promise<boolean> {
    if (await readBarrierWithin(this.opts.caughtUp, meshBarrierTimeoutMs)) return true;
    this.opts.log.debug('mesh: no read barrier (no quorum?): only adding peers this pass');
    // Try again later: what was held back is still to do.
    this.loop.retryLater();
    return false;
  }

  private get endpoint(): string {
    return this.opts.config.advertise ?? this.opts.config.listen;
  }

  /** Writes `publicKey` and the endpoint into the node's record (keeping the leader's address and the last report). */
  private writeKey(publicKey: string): Promise<void> {
    const endpoint = this.endpoint;
    return this.opts.writer.updateMesh((cur) => ({
      publicKey, endpoint, address: cur?.address ?? null, peers: cur?.peers ?? [], reportedAt: cur?.reportedAt ?? null,
    }));
  }

  /** Makes the node's record name its current key and endpoint (keeping the leader's address). */
  private async publish(): Promise<void> {
    const { keys, endpoint } = this;
    const mine = [...this.opts.view.nodes()].find((n) => n.id === this.opts.self)?.mesh ?? null;
    if (mine !== null && mine.publicKey === keys.publicKey && mine.endpoint === endpoint) return;
    try {
      await this.writeKey(keys.publicKey);
      this.opts.log.info(`mesh: published this node's WireGuard key ${keys.publicKey.slice(0, 8)}… and endpoint ${endpoint}`);
    } catch (err) {
      // No quorum yet (or the control plane's level): the interface is converged all the same.
      this.opts.log.debug(`mesh: publishing this node's key failed (${(err as Error).message}); will retry`);
      this.loop.retryLater();
    }
  }

  /** Writes the peers' handshakes and counters into this node's record. */
  private async report(): Promise<void> {
    if (this.loop.closed || !this.interfaceReady || this.plan === null) return;
    try {
      const dump = await this.opts.wg.show();
      const peers = peerStatuses(dump, this.plan.nodeByKey);
      const reportedAt = Date.now();
      await this.opts.writer.updateMesh((cur) => (cur === null ? null : { ...cur, peers, reportedAt }));
    } catch (err) {
      this.opts.log.debug(`mesh: reporting peers failed (${(err as Error).message})`);
    }
  }
}

/** The dump's peers as a node record reports them, named by node id (peers no node claims are left out). */
export function peerStatuses(dump: WgInterfaceDump, nodeByKey: ReadonlyMap<string, string>): MeshPeerStatus[] {
  const out: MeshPeerStatus[] = [];
  for (const p of dump.peers) {
    const nodeId = nodeByKey.get(p.publicKey);
    if (nodeId === undefined) continue;
    out.push({ nodeId, latestHandshakeAt: p.latestHandshakeSec === null ? null : p.latestHandshakeSec * 1000, rxBytes: p.rxBytes, txBytes: p.txBytes });
  }
  return out.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
}
