// The operator: membership changes (add a learner, promote it, remove a voter or learner, a joint
// replace of one voter or of a majority, the leader included) and leadership transfers, asked of
// the current leader the way an operator's tool would.

import type { SeededPrng } from '../../src/raft/prng.ts';
import { ProposalDroppedError, type ConfChange, type NodeId } from '../../src/raft/types.ts';
import type { SimNode } from './sim-node.ts';
import type { World } from './world.ts';

const majorityOf = (n: number): number => Math.floor(n / 2) + 1;

/** New nodes one seed may add. */
const nodesAddedMax = 8;
const membersMax = 9;
const votersMax = 7;

type Change = 'addLearner' | 'addVoter' | 'promote' | 'removeVoter' | 'removeLearner' | 'replace' | 'replaceMajority';

export class Operator {
  constructor(private readonly world: World, private readonly prng: SeededPrng) {}

  onTick(): void {
    const f = this.world.scenario.faults;
    if (f.confChange > 0 && this.prng.chance(f.confChange)) this.changeMembership();
    if (f.transfer > 0 && this.prng.chance(f.transfer)) this.transferLeadership();
  }

  private changeMembership(): void {
    const leader = this.world.leader();
    if (leader === undefined || leader.raw === null) return;
    const cs = leader.raw.confState();
    if (cs.votersOutgoing.length > 0) {
      if (!cs.autoLeave) this.propose(leader, { changes: [], leaveJoint: true }, []);
      return;
    }
    const options: Change[] = [];
    const members = cs.voters.length + cs.learners.length;
    if (members < membersMax && this.world.stats.nodesAdded < nodesAddedMax) options.push('addLearner', 'addLearner');
    if (members < membersMax && cs.voters.length < votersMax && this.world.stats.nodesAdded < nodesAddedMax) options.push('addVoter');
    if (cs.learners.length > 0 && cs.voters.length < votersMax) options.push('promote', 'promote');
    if (cs.voters.length > 1) options.push('removeVoter');
    if (cs.learners.length > 0) options.push('removeLearner');
    if (cs.learners.length > 0 && cs.voters.length > 1) options.push('replace');
    const freshAllowed = Math.min(membersMax - members, nodesAddedMax - this.world.stats.nodesAdded);
    if (cs.voters.length > 1 && cs.learners.length + freshAllowed >= majorityOf(cs.voters.length)) options.push('replaceMajority');
    if (options.length === 0) return;
    this.apply(leader, this.pick(options), cs.voters, cs.learners);
  }

  /** Returns whether the leader took the change. */
  private apply(leader: SimNode, change: Change, voters: NodeId[], learners: NodeId[]): boolean {
    switch (change) {
      case 'addLearner':
      case 'addVoter': {
        const fresh = this.world.spawn();
        this.world.stats.nodesAdded++;
        const type = change === 'addLearner' ? 'addLearner' : 'addVoter';
        return this.propose(leader, { changes: [{ type, node: fresh.id }] }, [fresh]);
      }
      case 'promote':
        return this.propose(leader, { changes: [{ type: 'addVoter', node: this.pick(learners) }] }, []);
      case 'removeVoter': {
        const victim = this.prng.chance(0.3) ? leader.id : this.pick(voters);
        return this.propose(leader, { changes: [{ type: 'removeNode', node: victim }] }, []);
      }
      case 'removeLearner':
        return this.propose(leader, { changes: [{ type: 'removeNode', node: this.pick(learners) }] }, []);
      case 'replace': {
        const autoLeave = this.prng.chance(0.5) ? undefined : this.prng.chance(0.5);
        const cc: ConfChange = {
          changes: [{ type: 'addVoter', node: this.pick(learners) }, { type: 'removeNode', node: this.pick(voters) }],
        };
        if (autoLeave !== undefined) cc.autoLeave = autoLeave;
        return this.propose(leader, cc, []);
      }
      case 'replaceMajority': {
        // As many voters as make a majority, for as many learners and, if there are too few, new
        // empty nodes: the outgoing and incoming majorities then share at most a minority of the
        // old voters, and the joint phase lasts while the new nodes catch up.
        const n = majorityOf(voters.length);
        const promoted = this.sample(learners, n);
        const fresh: SimNode[] = [];
        while (promoted.length + fresh.length < n) {
          fresh.push(this.world.spawn());
          this.world.stats.nodesAdded++;
        }
        const cc: ConfChange = {
          changes: [
            ...[...promoted, ...fresh.map((f) => f.id)].map((node) => ({ type: 'addVoter' as const, node })),
            ...this.sample(voters, n).map((node) => ({ type: 'removeNode' as const, node })),
          ],
        };
        const taken = this.propose(leader, cc, fresh);
        if (taken) this.world.stats.majorityReplacements++;
        return taken;
      }
    }
  }

  /** Proposes the change; a refused change that spawned nodes stops them again. Returns whether it was taken. */
  private propose(leader: SimNode, cc: ConfChange, fresh: SimNode[]): boolean {
    const w = this.world;
    let refused = false;
    w.input(leader, (raw) => {
      try {
        raw.proposeConfChange(cc);
      } catch (e) {
        if (!(e instanceof ProposalDroppedError)) throw e;
        refused = true;
      }
    });
    w.log(`operator: conf change ${JSON.stringify(cc)} via ${leader.id}${refused ? ' REFUSED' : ''}`);
    if (!refused) w.stats.confChangesProposed++;
    else for (const f of fresh) w.stop(f, false);
    return !refused;
  }

  private transferLeadership(): void {
    const w = this.world;
    const leader = w.leader();
    if (leader === undefined || leader.raw === null) return;
    const cs = leader.raw.confState();
    const candidates = cs.voters.filter((v) => v !== leader.id);
    // Now and then an invalid target (a learner, or the leader itself), which must be harmless.
    const odd = [...cs.learners, leader.id];
    const to = candidates.length > 0 && !this.prng.chance(0.05) ? this.pick(candidates) : this.pick(odd);
    const others = w.upNodes().filter((n) => n !== leader);
    const via = others.length > 0 && this.prng.chance(0.15) ? this.pick(others) : leader;
    w.input(via, (raw) => {
      try {
        raw.transferLeadership(to);
      } catch (e) {
        if (!(e instanceof ProposalDroppedError)) throw e;
      }
    });
    w.log(`operator: transfer leadership from ${leader.id} to ${to} via ${via.id}`);
    w.stats.transfersRequested++;
    if (candidates.includes(to)) w.transfer = { to, until: w.tick + 3 * w.scenario.raft.electionTimeoutTicks };
  }

  /** `n` distinct items, in random order. */
  private sample<T>(items: readonly T[], n: number): T[] {
    const left = [...items];
    const out: T[] = [];
    while (out.length < n && left.length > 0) out.push(left.splice(this.prng.nextInt(left.length), 1)[0] as T);
    return out;
  }

  private pick<T>(items: readonly T[]): T {
    return items[this.prng.nextInt(items.length)] as T;
  }
}
