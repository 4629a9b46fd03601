// The leader raising the cluster's committed feature level (src/base/feature-level.ts) to the
// highest level every member, learners too, supports, as their transport handshakes report it:
// one feature-level entry at a time, proposed again on a later tick if it fails.

import type { NodeId } from '../raft/types.ts';
import type { PeerStats } from '../../transport/types.ts';
import { featureLevelInitial, supportedByAll } from '../base/feature-level.ts';
import type { Logger } from '../log.ts';

/** What the raiser needs of the driver. */
export interface FeatureLevelHost {
  /** Every member of the configuration: voters and learners, incoming and outgoing. */
  members(): NodeId[];
  /** The transport's peers, with the levels their handshakes announced. */
  peers(): PeerStats[];
  /** Proposes a feature-level entry raising the level to `level`; settles once it is applied here. */
  propose(level: number): Promise<unknown>;
}

export class FeatureLevelRaiser {
  /** A raise proposed by this node and not yet applied. */
  private raising: Promise<unknown> | undefined;

  constructor(
    private readonly id: NodeId,
    /** The highest level this build supports. */
    private readonly levelMax: number,
    private readonly host: FeatureLevelHost,
    private readonly log: Logger,
  ) {}

  /** On the leader's tick: proposes the highest level every member supports, if above `committed`. */
  maybeRaise(committed: number): void {
    if (committed >= this.levelMax || this.raising !== undefined) return;
    const members = this.host.members();
    const peers = new Map(this.host.peers().map((p) => [p.id, p]));
    const target = supportedByAll(members, this.id, this.levelMax, (id) => {
      const p = peers.get(id);
      if (p?.softwareVersion === undefined) return undefined;
      return p.featureLevelMax ?? featureLevelInitial;
    });
    if (target === undefined || target <= committed) return;
    this.log.info(`every member supports feature level ${target}: proposing it (committed: ${committed})`);
    this.raising = this.host.propose(target)
      .catch((err: unknown) => this.log.warn(`raising the feature level to ${target} failed: ${(err as Error).message}; will retry`))
      .finally(() => { this.raising = undefined; });
  }
}
