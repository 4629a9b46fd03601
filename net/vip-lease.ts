// The holder's side of the VIP lease (src/resources/vips.ts; docs/network.md, "Virtual IP"). While
// the node holds a VIP in an epoch, the keeper renews `shoal.vip-leases/<node id>` every third of
// the lease: it notes the send time s on the boot clock, proposes the renewal (compared on the
// node's epoch), and only once the write has committed holds the lease until s + lease. A renewal
// that fails, times out or is refused (the epoch was raised) extends nothing. Renewals overlap (at
// most vipRenewalsInFlightMax), so a commit slower than the interval leaves no gap. Nothing is
// written to disk: the kernel lifetime of the address is what outlives a dead or frozen shoal, and
// a restarted shoal believes in no lease until it renews.

import type { CommandResult, JsonObject, TxnCommand } from '../fsm/index.ts';
import type { DocumentStore } from '../fsm/index.ts';
import { nodesCollection } from '../src/resources/collections.ts';
import { vipLeasesCollection, vipRenewIntervalMs, type VipLeaseRecord } from '../src/resources/vips.ts';

/** Renewals awaiting their commit at once; beyond, a tick sends none. */
export const vipRenewalsInFlightMax = 3;

export interface VipLeaseKeeperOptions {
  store: DocumentStore;
  nodeId: string;
  leaseMs: number;
  bootNow(): number;
  /** Proposes a renewal; resolves with the state machine's answer once applied here. */
  propose(cmd: TxnCommand): Promise<CommandResult>;
  log: { info(msg: string): void; warn(msg: string): void };
  /** A renewal extended the lease (the VIP agent makes a pass: the lifetime follows it). */
  onRenewed?: () => void;
}

export class VipLeaseKeeper {
  private wanted: number | null = null;
  /** Boot-clock ms until which the lease of each epoch holds (the latest renewal that committed). */
  private readonly held = new Map<number, number>();
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private failing = false;

  constructor(private readonly o: VipLeaseKeeperOptions) {}

  /** The epoch in which the node holds a VIP (renew), or null (let it run out). */
  want(epoch: number | null): void {
    if (this.closed || epoch === this.wanted) return;
    this.wanted = epoch;
    clearTimeout(this.timer);
    this.timer = undefined;
    if (epoch !== null) this.renew();
  }

  /** Boot-clock ms until which the lease of `epoch` holds, or null when it does not hold now. */
  heldUntil(epoch: number): number | null {
    const until = this.held.get(epoch);
    return until !== undefined && until > this.o.bootNow() ? until : null;
  }

  /** Stops renewing; what is held runs out on its own. Idempotent. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private renew(): void {
    if (this.closed || this.wanted === null) return;
    const epoch = this.wanted;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.renew(), vipRenewIntervalMs(this.o));
    this.timer.unref();
    if (this.inFlight >= vipRenewalsInFlightMax) return;
    this.inFlight++;
    const sentAt = this.o.bootNow();
    this.write(epoch).then(() => {
      this.failing = false;
      this.extend(epoch, sentAt + this.o.leaseMs);
    }, (err: unknown) => {
      if (!this.failing) this.o.log.warn(`vip: renewing the VIP lease of epoch ${epoch} failed (${(err as Error).message}); the VIPs here go off when it runs out unless a renewal commits`);
      this.failing = true;
    }).finally(() => {
      this.inFlight--;
    });
  }

  private async write(epoch: number): Promise<void> {
    const { store, nodeId, leaseMs } = this.o;
    const cur = store.get(vipLeasesCollection, nodeId)?.doc as { seq?: unknown } | undefined;
    const doc: VipLeaseRecord = { nodeId, epoch, seq: typeof cur?.seq === 'number' ? cur.seq + 1 : 0, leaseMs };
    // Waiting longer than the lease is pointless: a renewal that lands later holds nothing.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no commit within ${leaseMs} ms`)), leaseMs);
      timer.unref();
    });
    try {
      const r = await Promise.race([this.o.propose({
        op: 'txn', compare: [{ collection: nodesCollection, id: nodeId, target: 'value', path: 'epoch', cmp: '=', value: epoch }],
        success: [{ op: 'put', collection: vipLeasesCollection, id: nodeId, doc: doc as unknown as JsonObject }], failure: [],
      }), timeout]);
      if (!r.ok) throw new Error(`refused: ${r.error.code}: ${r.error.message}`);
      if (r.kind === 'txn' && !r.succeeded) throw new Error(`this node's epoch is no longer ${epoch}`);
    } finally {
      clearTimeout(timer);
    }
  }

  private extend(epoch: number, untilBootMs: number): void {
    if (this.closed || untilBootMs <= this.o.bootNow() || untilBootMs <= (this.held.get(epoch) ?? 0)) return;
    this.held.set(epoch, untilBootMs);
    for (const e of [...this.held.keys()]) if (e !== epoch) this.held.delete(e);
    this.o.onRenewed?.();
  }
}
