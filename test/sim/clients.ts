// The clients: proposals of unique payloads and ReadIndex reads, sent mostly to the leader and
// sometimes to any node (a follower forwards proposals and reads to the leader).

import type { SeededPrng } from '../../src/raft/prng.ts';
import { ProposalDroppedError } from '../../src/raft/types.ts';
import type { SimNode } from './sim-node.ts';
import type { World } from './world.ts';

const encoder = new TextEncoder();

export class Clients {
  private proposals = 0;
  private reads = 0;

  constructor(private readonly world: World, private readonly prng: SeededPrng) {}

  onTick(): void {
    const w = this.world.scenario.workload;
    for (let i = this.count(w.proposeRate); i > 0; i--) {
      const node = this.target();
      if (node !== undefined) this.propose(node, `p${this.proposals++}.${'x'.repeat(this.prng.nextInt(w.payloadBytesMax))}`);
    }
    for (let i = this.count(w.readRate); i > 0; i--) {
      const node = this.target();
      if (node !== undefined) this.read(node);
    }
  }

  /** Proposes `payload` to `node`; returns whether the node accepted it. */
  propose(node: SimNode, payload: string): boolean {
    const w = this.world;
    let accepted = false;
    let reason = '';
    w.input(node, (raw) => {
      try {
        raw.propose(encoder.encode(payload));
        node.pending.add(payload);
        accepted = true;
      } catch (e) {
        if (!(e instanceof ProposalDroppedError)) throw e;
        reason = e.reason;
      }
    });
    if (accepted) w.stats.proposals++;
    else w.stats.proposalsDropped++;
    if (w.trace.enabled) w.log(`client: propose ${payload.slice(0, 12)} to ${node.id}${accepted ? '' : ` DROPPED (${reason})`}`);
    return accepted;
  }

  private read(node: SimNode): void {
    const w = this.world;
    const context = `r${this.reads++}`;
    w.emit({ kind: 'readIssue', node: node.id, context });
    w.stats.readsIssued++;
    w.input(node, (raw) => {
      try {
        raw.readIndex(context);
      } catch (e) {
        if (!(e instanceof ProposalDroppedError)) throw e;
      }
    });
    if (w.trace.enabled) w.log(`client: read ${context} at ${node.id}`);
  }

  private target(): SimNode | undefined {
    const leader = this.world.leader();
    if (leader !== undefined && this.prng.chance(0.7)) return leader;
    const up = this.world.upNodes();
    return up.length === 0 ? undefined : up[this.prng.nextInt(up.length)];
  }

  private count(rate: number): number {
    const whole = Math.floor(rate);
    return whole + (this.prng.chance(rate - whole) ? 1 : 0);
  }
}
