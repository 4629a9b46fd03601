// ReadIndex bookkeeping on the leader. A read is recorded with the commit index at the time it
// arrived; it may be served once a quorum has answered a heartbeat sent after that, which proves
// this node was still leader when the read arrived (no newer leader could have committed more).

import type { NodeId } from './types.ts';

export interface ReadRequest {
  /** Commit index when the read arrived. */
  index: number;
  /** Node that asked (the leader itself for local reads). */
  from: NodeId;
  /** The caller's context, echoed in the answer. */
  context: string;
  acks: Set<NodeId>;
}

export class ReadOnly {
  private readonly pending = new Map<string, ReadRequest>();
  private queue: string[] = [];

  constructor(private readonly requestsMax: number) {}

  static key(from: NodeId, context: string): string {
    return `${from}\u0000${context}`;
  }

  get size(): number {
    return this.queue.length;
  }

  full(): boolean {
    return this.queue.length >= this.requestsMax;
  }

  /** Records a request; returns its key, the context heartbeats carry. */
  add(index: number, from: NodeId, context: string): string {
    const key = ReadOnly.key(from, context);
    if (!this.pending.has(key)) {
      this.pending.set(key, { index, from, context, acks: new Set() });
      this.queue.push(key);
    }
    return key;
  }

  /** Records that `id` answered a heartbeat carrying `key`; returns who has acknowledged it. */
  recvAck(id: NodeId, key: string): ReadonlySet<NodeId> | undefined {
    const req = this.pending.get(key);
    if (req === undefined) return undefined;
    req.acks.add(id);
    return req.acks;
  }

  /** Removes and returns every request up to and including `key`, oldest first. */
  advance(key: string): ReadRequest[] {
    const at = this.queue.indexOf(key);
    if (at < 0) return [];
    const done = this.queue.slice(0, at + 1);
    this.queue = this.queue.slice(at + 1);
    const out: ReadRequest[] = [];
    for (const k of done) {
      const req = this.pending.get(k);
      this.pending.delete(k);
      if (req) out.push(req);
    }
    return out;
  }

  /** The key of the newest pending request, carried by the next heartbeat. */
  lastPendingKey(): string | undefined {
    return this.queue[this.queue.length - 1];
  }
}
