// Membership changes as pure functions from (config, progress) to a new (config, progress).
//
// A change that touches the voters always goes through a joint configuration: the incoming
// voters are changed while the old ones stay as the outgoing half, and decisions need a majority
// of both until the joint config is left. A change that only adds or removes learners is applied
// directly: it cannot affect any quorum.

import { Progress } from './progress.ts';
import { cloneConfig, configProblem, isJoint, isVoter, type TrackerConfig } from './tracker.ts';
import type { ConfChange, ConfChangeSingle, NodeId } from './types.ts';

export interface ChangeResult {
  config: TrackerConfig;
  progress: Map<NodeId, Progress>;
}

export class ConfChangeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfChangeError';
  }
}

interface Context {
  /** Index new members' progress starts probing from. */
  lastIndex: number;
  inflightMax: number;
}

export function isLeaveJoint(cc: ConfChange): boolean {
  return cc.changes.length === 0;
}

/** Whether a change must go through a joint configuration (it changes the voters). */
export function needsJoint(cfg: TrackerConfig, changes: readonly ConfChangeSingle[]): boolean {
  return changes.some((c) => (c.type === 'addVoter' ? !cfg.voters.incoming.has(c.node) : cfg.voters.incoming.has(c.node)));
}

/** Computes the result of applying `cc` to the current config. Throws ConfChangeError if invalid. */
export function changeConfig(cfg: TrackerConfig, progress: ReadonlyMap<NodeId, Progress>, cc: ConfChange, ctx: Context): ChangeResult {
  if (isLeaveJoint(cc)) return leaveJoint(cfg, progress);
  if (isJoint(cfg)) throw new ConfChangeError('a joint configuration is in effect; leave it before changing membership again');
  const result = needsJoint(cfg, cc.changes) ? enterJoint(cfg, progress, cc, ctx) : simple(cfg, progress, cc, ctx);
  const problem = configProblem(result.config, result.progress);
  if (problem !== null) throw new ConfChangeError(problem);
  if (result.config.voters.incoming.size === 0) throw new ConfChangeError('the change removes every voter');
  return result;
}

function enterJoint(cfg: TrackerConfig, progress: ReadonlyMap<NodeId, Progress>, cc: ConfChange, ctx: Context): ChangeResult {
  const next = cloneConfig(cfg);
  next.voters.outgoing = new Set(cfg.voters.incoming);
  next.autoLeave = cc.autoLeave ?? true;
  const prs = new Map(progress);
  applyAll(next, prs, cc.changes, ctx);
  return { config: next, progress: prs };
}

function simple(cfg: TrackerConfig, progress: ReadonlyMap<NodeId, Progress>, cc: ConfChange, ctx: Context): ChangeResult {
  const next = cloneConfig(cfg);
  const prs = new Map(progress);
  applyAll(next, prs, cc.changes, ctx);
  return { config: next, progress: prs };
}

function leaveJoint(cfg: TrackerConfig, progress: ReadonlyMap<NodeId, Progress>): ChangeResult {
  if (!isJoint(cfg)) throw new ConfChangeError('no joint configuration to leave');
  const next = cloneConfig(cfg);
  const prs = new Map(progress);
  for (const id of next.learnersNext) {
    next.learners.add(id);
    const pr = prs.get(id);
    if (pr) pr.learner = true;
  }
  next.learnersNext.clear();
  for (const id of next.voters.outgoing) {
    if (!next.voters.incoming.has(id) && !next.learners.has(id)) prs.delete(id);
  }
  next.voters.outgoing.clear();
  next.autoLeave = false;
  return { config: next, progress: prs };
}

function applyAll(cfg: TrackerConfig, prs: Map<NodeId, Progress>, changes: readonly ConfChangeSingle[], ctx: Context): void {
  for (const c of changes) {
    if (c.node === '') throw new ConfChangeError('a change names no node');
    switch (c.type) {
      case 'addVoter': makeVoter(cfg, prs, c.node, ctx); break;
      case 'addLearner': makeLearner(cfg, prs, c.node, ctx); break;
      case 'removeNode': remove(cfg, prs, c.node); break;
    }
  }
}

function ensureProgress(prs: Map<NodeId, Progress>, id: NodeId, learner: boolean, ctx: Context): Progress {
  let pr = prs.get(id);
  if (pr === undefined) {
    // A new member: probe from the end of the leader's log; it will be walked back as needed.
    pr = new Progress(ctx.lastIndex + 1, ctx.inflightMax, learner);
    prs.set(id, pr);
  } else {
    // Replace rather than mutate: progress objects may be shared with the previous config.
    const copy = new Progress(pr.next, ctx.inflightMax, learner);
    copy.match = pr.match;
    copy.recentActive = pr.recentActive;
    prs.set(id, copy);
    pr = copy;
  }
  return pr;
}

function makeVoter(cfg: TrackerConfig, prs: Map<NodeId, Progress>, id: NodeId, ctx: Context): void {
  if (cfg.voters.incoming.has(id)) return;
  ensureProgress(prs, id, false, ctx);
  cfg.learners.delete(id);
  cfg.learnersNext.delete(id);
  cfg.voters.incoming.add(id);
}

function makeLearner(cfg: TrackerConfig, prs: Map<NodeId, Progress>, id: NodeId, ctx: Context): void {
  if (cfg.learners.has(id)) return;
  cfg.voters.incoming.delete(id);
  // An outgoing voter keeps voting until the joint config is left; it turns learner then.
  if (cfg.voters.outgoing.has(id)) {
    cfg.learnersNext.add(id);
    ensureProgress(prs, id, false, ctx);
  } else {
    cfg.learners.add(id);
    ensureProgress(prs, id, true, ctx);
  }
}

function remove(cfg: TrackerConfig, prs: Map<NodeId, Progress>, id: NodeId): void {
  cfg.voters.incoming.delete(id);
  cfg.learners.delete(id);
  cfg.learnersNext.delete(id);
  if (!isVoter(cfg, id)) prs.delete(id);
}
