// What each node sees of the others: node health's second opinion (docs/control-plane.md, "Node
// health"). Every node keeps one document, `shoal.peer-views/<its id>`, written only by itself,
// listing the members it has not heard from for a while (no Raft message, no transport frame,
// ping or pong). It is rewritten only when that list changes, so a healthy cluster writes
// nothing; a node's death costs one write per surviving member, its return one more.
//
// The leader reads the list of every member it hears itself: a member whose committed list does
// not name a silent node still hears it, and a node that some member hears is not dead, whatever
// the leader sees (src/control/node-health.ts).

import { z } from 'zod';

/** Peer views (PeerViewRecord), by node id. Written only by that node (src/node/peer-view-reporter.ts). */
export const peerViewsCollection = 'shoal.peer-views';

/** The most members a view names: a cluster has at most a few dozen; a bound for what is read back. */
export const peerViewMembersMax = 256;

export interface PeerViewRecord {
  nodeId: string;
  /** The members this node has not heard from for `unheardAfterMs` or more, sorted. */
  unheard: string[];
  /** The silence after which this node counts a member unheard (its own setting). */
  unheardAfterMs: number;
}

export const peerViewRecordSchema = z.object({
  nodeId: z.string().min(1).max(256),
  unheard: z.array(z.string().min(1).max(256)).max(peerViewMembersMax),
  unheardAfterMs: z.number().int().min(0),
}).strict();

/** Each node's committed view, by node id: the set it does not hear. Invalid documents are left out. */
export function readPeerViews(docs: Iterable<{ id: string; doc: unknown }>): Map<string, ReadonlySet<string>> {
  const views = new Map<string, ReadonlySet<string>>();
  for (const { id, doc } of docs) {
    const r = peerViewRecordSchema.safeParse(doc);
    if (r.success && r.data.nodeId === id) views.set(id, new Set(r.data.unheard));
  }
  return views;
}
