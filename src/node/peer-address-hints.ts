// Peer hints: addresses where some member may be, whose id is not known. They come from the
// operator (`--peers`, `peer.peers`) or from a peer's hello (the addresses that peer knows).
// Each is probed (transport/peer-probe.ts: a TLS handshake in which the node there proves its id
// with its certificate) until one probe succeeds; what it finds goes to the address book. A
// hint is never believed by itself.

import type { NodeId } from '../raft/types.ts';
import { backoffDelayMs } from '../base/backoff.ts';

/** Where a hint came from: the operator's are kept until they answer; a peer's are given up after a while. */
export type HintSource = 'operator' | 'peer';

/** Hints tracked at most (the operator's and peers'); further peer hints are ignored. */
export const peerHintsTrackedMax = 64;

/** Failed probes after which a hint from a peer is given up (about two minutes with the backoff). */
export const peerHintFailuresMax = 15;

/** Backoff between probes of one hint: from the first to the last, doubling. */
export const hintRetryMsMin = 500;
export const hintRetryMsMax = 10_000;

interface Hint {
  source: HintSource;
  failures: number;
  /** performance.now() before which it is not probed again. */
  nextAt: number;
  probing: boolean;
}

export interface ProbeOutcome {
  address: string;
  /** The node that answered there, or the error. */
  id?: NodeId;
  error?: string;
  /** The first failure of this hint (warn once; later ones are quieter). */
  firstFailure?: boolean;
  /** A peer's hint given up after peerHintFailuresMax failures. */
  givenUp?: boolean;
}

/** The hints still to probe and their backoff. Pure bookkeeping: the caller probes. */
export class PeerHints {
  private readonly hints = new Map<string, Hint>();

  constructor(operatorHints: readonly string[], private readonly random: () => number = Math.random) {
    for (const a of operatorHints) this.hints.set(a, { source: 'operator', failures: 0, nextAt: 0, probing: false });
  }

  /** Adds a peer's hints not tracked yet; returns how many were new. */
  addFromPeer(addresses: readonly string[]): number {
    let added = 0;
    for (const a of addresses) {
      if (this.hints.has(a) || this.hints.size >= peerHintsTrackedMax) continue;
      this.hints.set(a, { source: 'peer', failures: 0, nextAt: 0, probing: false });
      added++;
    }
    return added;
  }

  /** Stops probing `address`: something else showed where its node is. */
  forget(address: string): void {
    this.hints.delete(address);
  }

  /** Hints due for a probe at `nowMs`, marked as being probed. */
  due(nowMs: number): string[] {
    const out: string[] = [];
    for (const [a, h] of this.hints) {
      if (h.probing || h.nextAt > nowMs) continue;
      h.probing = true;
      out.push(a);
    }
    return out;
  }

  /** Records a probe's result: an answered hint is done; a failed one waits longer each time. */
  settle(address: string, nowMs: number, result: { id: NodeId } | { error: string }): ProbeOutcome {
    const h = this.hints.get(address);
    if ('id' in result) {
      this.hints.delete(address);
      return { address, id: result.id };
    }
    if (h === undefined) return { address, error: result.error };
    h.probing = false;
    h.failures++;
    if (h.source === 'peer' && h.failures >= peerHintFailuresMax) {
      this.hints.delete(address);
      return { address, error: result.error, givenUp: true };
    }
    const base = backoffDelayMs(h.failures, hintRetryMsMin, hintRetryMsMax);
    h.nextAt = nowMs + base * (0.5 + this.random() / 2);
    return { address, error: result.error, firstFailure: h.failures === 1 };
  }

  /** The operator's hints not answered yet (what a hello passes on, with the book's addresses). */
  operatorHints(): string[] {
    return [...this.hints].filter(([, h]) => h.source === 'operator').map(([a]) => a);
  }

  get size(): number {
    return this.hints.size;
  }
}
