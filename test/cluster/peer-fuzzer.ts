// A member gone bad: connects to a node's peer port with a member's certificate (read from that
// member's data directory), says hello as that member, and sends garbage, malformed and
// meaningless frames, corrupted frames and frames of past terms (test/transport/fuzz-messages.ts)
// in bursts, reconnecting whenever the connection closes (the real member's own connection
// replaces ours, and ours replaces it again). Only what a correct cluster must shrug off is sent:
// a frame the receiver would admit is skipped, because Raft trusts its members and an admitted
// lie can stall it. Used by test/cluster/peer-fuzz.fuzz.test.ts and the fault suite's nemesis.

import fc from 'fast-check';
import { loadIdentity, loadTls } from '../../src/node/identity.ts';
import type { NodeId } from '../../src/raft/types.ts';
import { classify, hostileRecipeArb, render, type Recipe, type Route } from '../transport/fuzz-messages.ts';
import { RawPeer } from '../transport/raw-peer.ts';

export interface FuzzMember {
  id: NodeId;
  /** host:port of its peer listener. */
  peerAddress: string;
  /** Its data directory (node.json, tls/). */
  dir: string;
}

export interface PeerFuzzerOptions {
  /** The member whose identity we borrow. */
  as: FuzzMember;
  /** The node we send to. */
  target: FuzzMember;
  /** Every member's id. */
  members: readonly NodeId[];
  /**
   * A lower bound of the target's current term (its /healthz term, read just before): a frame
   * of a term at or above it would be admitted, and is not sent.
   */
  term: () => Promise<number>;
  seed: number;
  /** Frames per burst, and the pause between bursts. */
  burstFrames?: number;
  pauseMs?: number;
}

export interface FuzzStats {
  connections: number;
  /** Connections that could not be opened (refused, the target down or paused). */
  failedConnections: number;
  /** WebSocket messages sent, by what the receiver does with them. */
  dropped: number;
  stale: number;
  textFrames: number;
  /** Generated frames not sent because the receiver would have admitted them. */
  skipped: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class PeerFuzzer {
  readonly stats: FuzzStats = { connections: 0, failedConnections: 0, dropped: 0, stale: 0, textFrames: 0, skipped: 0 };
  private readonly recipes: Iterator<Recipe>;
  private stopped = false;
  private peer: RawPeer | undefined;

  constructor(private readonly o: PeerFuzzerOptions) {
    this.recipes = recipeStream(o.seed);
  }

  /** Sends bursts until `durationMs` has passed or stop() is called. Never throws. */
  async run(durationMs: number): Promise<FuzzStats> {
    const end = Date.now() + durationMs;
    const identity = loadIdentity(this.o.as.dir);
    const tls = loadTls(this.o.as.dir);
    while (!this.stopped && Date.now() < end) {
      if (this.peer === undefined || !this.peer.isOpen) {
        this.peer = await RawPeer.connect({
          address: this.o.target.peerAddress, tls, clusterId: identity.clusterId, nodeId: identity.id, peerId: this.o.target.id, handshakeTimeoutMs: 2000,
        }).catch(() => undefined);
        if (this.peer === undefined) {
          this.stats.failedConnections++;
          await sleep(200);
          continue;
        }
        this.stats.connections++;
      }
      await this.burst(this.peer);
      await sleep(this.o.pauseMs ?? 20);
    }
    this.peer?.close();
    return this.stats;
  }

  stop(): void {
    this.stopped = true;
    this.peer?.close();
  }

  private async burst(peer: RawPeer): Promise<void> {
    const term = await this.o.term().catch(() => 0);
    // Below the first elected term nothing is stale; with term 0 unknown, every frame of a term is skipped.
    const route: Route = { from: this.o.as.id, to: this.o.target.id, members: this.o.members, term: Math.max(1, term) };
    for (let i = 0; i < (this.o.burstFrames ?? 50) && peer.isOpen; i++) {
      const recipe = this.recipes.next().value as Recipe;
      if (recipe.kind === 'garbage' && recipe.bytes.length > 0 && recipe.bytes[0] === 0x7b) {
        // Now and then a text frame: the peer protocol is binary only.
        if (peer.send(`{"t":"msg","garbage":${recipe.bytes.length}}`)) this.stats.textFrames++;
        continue;
      }
      const bytes = render(recipe, route);
      const fate = classify(bytes, route);
      if (fate === 'admitted') {
        this.stats.skipped++;
        continue;
      }
      if (peer.send(bytes)) this.stats[fate]++;
    }
    await peer.drain();
  }
}

/** An endless, seeded stream of hostile recipes. */
function* recipeStream(seed: number): Generator<Recipe> {
  for (let batch = 0; ; batch++) yield* fc.sample(hostileRecipeArb(), { seed: seed + batch, numRuns: 500 });
}
