// When this node's store applied each node's latest lease renewal (src/resources/lease.ts), on
// this node's monotonic clock, kept for the life of the node's control plane, leader or not.
//
// The leader replaces an exclusive task of a lost node only once lease + margin has passed since
// its store applied that node's last renewal. Any node's apply of a renewal comes after the agent
// sent it (causality, not clocks), so the time a follower applied it bounds it as well as the
// leader's would: a node that becomes leader knows when its own store applied the renewals, and
// does not wait a whole lease from the start of its loops for a node whose renewals it watched.
// What it did not watch (before this log started, or inside a snapshot it restored) counts as
// applied when the watch began (`sinceMs`): every such renewal was sent before that moment.

import type { DocumentStore } from '../../fsm/index.ts';
import type { WatchEvent } from '../../fsm/types.ts';
import { leasesCollection } from '../resources/collections.ts';
import { leaseRecordSchema } from '../resources/lease.ts';
import { vipLeaseRecordSchema, vipLeasesCollection, vipRecordSchema, vipsCollection } from '../resources/vips.ts';

/** Which puts count as a renewal: a collection, and the node, epoch and lease a document names (null: none). */
export interface RenewalSource {
  collection: string;
  read(doc: unknown): { nodeId: string; epoch: number; leaseMs: number } | null;
}

/** The exclusive services' lease (lease.ts): `shoal.leases/<node id>`. */
export const exclusiveRenewals: readonly RenewalSource[] = [{
  collection: leasesCollection, read: (d) => leaseRecordSchema.safeParse(d).data ?? null,
}];

/**
 * The VIP lease (vips.ts): `shoal.vip-leases/<node id>`, and each grant of a VIP to a holder (a
 * `shoal.vips` record naming it): a new holder has a whole lease + margin from its grant to renew
 * a first time before the leader may count its VIP as lost.
 */
/** The VIP lease's renewals alone (what `GET /v1/vips` shows as the lease left). */
export const vipLeaseRenewals: readonly RenewalSource[] = [
  { collection: vipLeasesCollection, read: (d) => vipLeaseRecordSchema.safeParse(d).data ?? null },
];

export const vipRenewals: readonly RenewalSource[] = [
  ...vipLeaseRenewals,
  { collection: vipsCollection, read: (d) => {
    const h = vipRecordSchema.safeParse(d).data?.holder;
    return h === undefined || h === null ? null : { nodeId: h.nodeId, epoch: h.epoch, leaseMs: 0 };
  } },
];

export interface RenewalSeen {
  /** When this node's store applied the renewal (monotonic ms). */
  atMs: number;
  /** The longest lease the node's renewals of that epoch claimed. */
  leaseMs: number;
}

export class RenewalLog {
  private readonly seen = new Map<string, RenewalSeen>();
  private since: number;
  private unsubscribe: (() => void)[] = [];

  constructor(private readonly store: DocumentStore, private readonly now: () => number, private readonly sources: readonly RenewalSource[] = exclusiveRenewals) {
    this.since = now();
    this.unsubscribe = [
      store.subscribe((ev) => this.note(ev)),
      // A restored snapshot's renewals were all sent before it was restored.
      store.subscribeRestore(() => {
        this.since = this.now();
        this.seen.clear();
      }),
    ];
  }

  /** Renewals before this (monotonic ms) were not watched: they count as applied then. */
  get sinceMs(): number {
    return this.since;
  }

  /** The latest renewal of `nodeId` in `epoch` this node applied since `sinceMs`, if any. */
  last(nodeId: string, epoch: number): RenewalSeen | undefined {
    return this.seen.get(`${nodeId}:${epoch}`);
  }

  close(): void {
    for (const u of this.unsubscribe) u();
    this.unsubscribe = [];
  }

  private note(ev: WatchEvent): void {
    if (ev.type !== 'put') return;
    const source = this.sources.find((x) => x.collection === ev.collection);
    const r = source?.read(ev.doc?.doc) ?? null;
    if (r === null) return;
    const key = `${r.nodeId}:${r.epoch}`;
    const prev = this.seen.get(key);
    this.seen.set(key, { atMs: this.now(), leaseMs: Math.max(r.leaseMs, prev?.leaseMs ?? 0) });
  }
}
