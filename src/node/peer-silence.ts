// When a Raft message from each peer last arrived here: the leader's node-health loop
// (src/control/node-health.ts) and the autopilot's dead-member removal (autopilot.ts) count a
// node's silence from it (RaftNode.silentForMs).

import type { NodeId } from '../raft/types.ts';

export class PeerSilence {
  /** When a message from each peer last arrived (performance.now()). */
  private readonly lastHeard = new Map<NodeId, number>();

  /** A message from `id` arrived now. */
  heard(id: NodeId): void {
    this.lastHeard.set(id, performance.now());
  }

  /** Ms since a message from `id` last arrived, or undefined if none did since this node started. */
  silentForMs(id: NodeId): number | undefined {
    const at = this.lastHeard.get(id);
    return at === undefined ? undefined : performance.now() - at;
  }
}
