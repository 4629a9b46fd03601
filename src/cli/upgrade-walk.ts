// The walk of `shoal upgrade` (docs/operations.md, "Rolling upgrade"): every member answers
// first; the build goes to every node to upgrade before any restarts (a build one node refuses
// stops the walk with nothing restarted); then node by node, followers first and the leader
// last: the cluster must be able to lose one voter, the node activates the build (a leader hands
// leadership over as it stops), and the walk waits until it is back, caught up and healthy.
// The first problem stops the walk, saying what was done and what to run next.

import { createReadStream, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { releaseName } from '../node/upgrade/upgrade-releases.ts';
import { readTarballPackageJson } from '../node/upgrade/upgrade-tarball.ts';
import { exitCodes } from './args.ts';
import { CliFailure, exitCodeOf, isClientFailure } from './client.ts';
import { getView, label, type View } from './cluster-view.ts';
import { planRollback, planUpgrade, rollbacksBelowLevel, type Step } from './upgrade-plan.ts';
import { activate, nodeReleases, releasesOf, rollback, sendBuild, toleranceProblem, viewFromAny, waitBack, type Member } from './upgrade-node.ts';
import type { UpgradeEvent } from './upgrade-output.ts';

/** How long the walk waits, after the last node, for the leader to raise the feature level. */
const featureLevelWaitMs = 15_000;

export interface WalkOptions {
  addr: string;
  /** The tarball to upgrade to; absent with `rollback`. */
  tarball?: string;
  rollback: boolean;
  resume: boolean;
  /** How long one node may take to come back. */
  nodeTimeoutMs: number;
  emit: (e: UpgradeEvent) => void;
}

export interface Tarball {
  file: string;
  version: string;
  sha256: string;
  bytes: number;
  release: string;
}

/** The tarball's version (from its package.json) and sha256, read before anything is sent. */
export async function readTarball(file: string): Promise<Tarball> {
  let pkgText: string;
  try {
    pkgText = await readTarballPackageJson(file);
  } catch (err) {
    throw new CliFailure(`${file} is not an npm package tarball (${(err as Error).message}); make one with 'npm pack' in a checkout`, exitCodes.failed, 'not_package');
  }
  const pkg = z.object({ name: z.literal('shoal'), version: z.string() }).loose().safeParse(JSON.parse(pkgText));
  if (!pkg.success) throw new CliFailure(`${file} is not a shoal package (its package.json is not named shoal)`, exitCodes.failed, 'not_package');
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  const sha256 = hash.digest('hex');
  return { file, version: pkg.data.version, sha256, bytes: statSync(file).size, release: releaseName(pkg.data.version, sha256) };
}

/** Each member's releases; every member must answer before anything changes. */
async function askEveryNode(view: View): Promise<Step['node'][]> {
  const out: Step['node'][] = [];
  for (const m of view.members) {
    try {
      out.push(nodeReleases(m, await releasesOf(m)));
    } catch (err) {
      throw new CliFailure(`${label(m)} does not answer GET /v1/upgrade at ${m.apiAddress} (${(err as Error).message}): every member must answer before an upgrade starts; bring it back first (nothing was changed)`, exitCodes.unavailable, 'unreachable');
    }
  }
  const outside = out.filter((n) => n.running === null);
  if (outside.length > 0) {
    throw new CliFailure(`${outside.map(label).join(', ')} do${outside.length === 1 ? 'es' : ''} not run from a releases folder, so a new build would not be started there: install each node with 'shoal install' (docs/operations.md, "Rolling upgrade"); nothing was changed`, exitCodes.failed, 'not_installed');
  }
  return out;
}

/** Where the walk stood when it stopped: the nodes back on their release, and whether the failing one was already activated. */
interface WalkState {
  done: string[];
  /** The failing node was activated (it restarts into the release) but not seen back. */
  activated: boolean;
}

/** Wraps a step's failure with what was done and what to run next. */
function stopped(err: unknown, step: string, node: Member, st: WalkState, pending: string[], again: string): CliFailure {
  const message = isClientFailure(err) ? err.message : (err as Error).message;
  const code = err instanceof CliFailure ? err.code : (err as { code?: string }).code ?? 'failed';
  const exit = isClientFailure(err) ? exitCodeOf(err) : exitCodes.failed;
  const done = st.done.length > 0 ? `done: ${st.done.join(', ')}` : st.activated ? 'no other node was restarted' : 'no node was restarted';
  const here = st.activated ? `; ${node.name} was activated and restarts into the new release, but was not seen back (see 'shoal status' and its log)` : '';
  const rest = pending.filter((n) => !(st.activated && n === node.name));
  const state = `${done}${here}${rest.length > 0 ? `; not yet: ${rest.join(', ')}` : ''}`;
  return new CliFailure(`stopped at ${label(node)} (${step}): ${message}. ${state}. Fix the cause, then run '${again}' to go on${again.includes('--rollback') ? '' : ", or 'shoal upgrade --rollback' to go back"}`, exit === exitCodes.usage ? exitCodes.failed : exit, code);
}

async function sendEverywhere(steps: Step[], t: Tarball, emit: WalkOptions['emit'], again: string): Promise<void> {
  for (const [i, s] of steps.entries()) {
    if (s.action !== 'upgrade') continue;
    emit({ event: 'step', node: s.node.name, id: s.node.id, index: i + 1, total: steps.length, step: 'sending', message: `sending the build (${(t.bytes / 1048576).toFixed(1)} MiB, sha256 ${t.sha256.slice(0, 12)}…)` });
    try {
      const r = await sendBuild(s.node, t.file, t.sha256);
      emit({ event: 'step', node: s.node.name, id: s.node.id, index: i + 1, total: steps.length, step: 'sent', message: `${r.existed === true ? 'already had' : 'checked and kept'} ${r.name} (node_modules ${r.nodeModules})` });
    } catch (err) {
      throw stopped(err, 'sending the build', s.node, { done: [], activated: false }, steps.filter((x) => x.action !== 'skip').map((x) => x.node.name), again);
    }
  }
}

/** Restarts one node into its step's release and waits until it is back. */
async function walkOne(s: Exclude<Step, { action: 'skip' }>, i: number, total: number, members: Member[], opts: WalkOptions, st: WalkState): Promise<void> {
  const at = { node: s.node.name, id: s.node.id, index: i + 1, total };
  const view = await viewFromAny(members);
  const problem = toleranceProblem(view);
  if (problem !== undefined) throw new CliFailure(`the cluster cannot lose ${label(s.node)} now: ${problem}`, exitCodes.failed, 'no_tolerance');
  const leads = view.leader === s.node.id;
  opts.emit({ ...at, event: 'step', step: 'activating', message: `${s.action === 'upgrade' ? 'activating' : 'rolling back to'} ${s.to}${leads ? ' (it leads: it hands leadership over as it stops)' : ''}` });
  await (s.action === 'upgrade' ? activate(s.node, s.to) : rollback(s.node));
  st.activated = true;
  const others = members.filter((m) => m.id !== s.node.id);
  const ms = await waitBack(s.node, s.to, others, opts.nodeTimeoutMs, (why) => opts.emit({ ...at, event: 'step', step: 'waiting', message: `waiting: ${why}` }));
  opts.emit({ ...at, event: 'step', step: 'back', message: `runs ${s.to}, caught up and healthy after ${(ms / 1000).toFixed(1)} s`, ms });
}

/** The feature level once the leader has raised it to what every member supports (or after a wait). */
async function finalLevel(members: Member[]): Promise<View> {
  const deadline = Date.now() + featureLevelWaitMs;
  for (;;) {
    const view = await viewFromAny(members);
    const supported = view.members.map((m) => m.featureLevelMax ?? null);
    const target = supported.every((x) => x !== null) ? Math.min(...(supported as number[])) : undefined;
    if (target === undefined || view.featureLevel === undefined || view.featureLevel >= target || Date.now() > deadline) return view;
    await new Promise((r) => setTimeout(r, 500));
  }
}

export async function walkUpgrade(opts: WalkOptions): Promise<View> {
  // The tarball first: a file that is not a build is refused before any node is asked.
  const t = opts.tarball === undefined ? undefined : await readTarball(opts.tarball);
  const view = await getView(opts.addr);
  const nodes = await askEveryNode(view);
  const steps = t === undefined ? planRollback(nodes, view.leader) : planUpgrade(nodes, view.leader, t.release);
  const again = t === undefined ? 'shoal upgrade --rollback' : `shoal upgrade --to ${t.file} --resume`;
  const below = rollbacksBelowLevel(steps, view.featureLevel ?? 1);
  if (below.length > 0) {
    const which = below.map((b) => `${b.node.name}'s ${b.to} (up to ${b.level})`).join(', ');
    throw new CliFailure(`the cluster runs at feature level ${view.featureLevel ?? 1}, raised once every member ran the newer release, and it never goes down; the previous releases apply lower levels only: ${which}. Rolled back, a node would stop at the first entry it cannot apply. Nothing was changed; to run the older release, restore a snapshot taken before the upgrade onto it (docs/operations.md, "Rolling upgrade")`, exitCodes.failed, 'feature_level');
  }
  const skipped = steps.filter((s) => s.action === 'skip');
  if (t !== undefined && !opts.resume && skipped.length > 0) {
    throw new CliFailure(`${skipped.map((s) => s.node.name).join(', ')} already run${skipped.length === 1 ? 's' : ''} ${t.release}: an earlier upgrade stopped part-way. Run '${again}' to go on with the others (nothing was changed)`, exitCodes.failed, 'partly_upgraded');
  }
  opts.emit({
    event: 'plan', action: t === undefined ? 'rollback' : 'upgrade', ...(t !== undefined ? { release: t.release, version: t.version, sha256: t.sha256 } : {}),
    nodes: steps.map((s) => ({ node: s.node.name, id: s.node.id, action: s.action, ...(s.action === 'skip' ? { why: s.why } : { to: s.to }) })),
  });
  if (t !== undefined) await sendEverywhere(steps, t, opts.emit, again);
  const members: Member[] = [...view.members].sort((a, b) => Number(b.id === view.leader) - Number(a.id === view.leader));
  const st: WalkState = { done: [], activated: false };
  for (const [i, s] of steps.entries()) {
    if (s.action === 'skip') {
      opts.emit({ event: 'step', node: s.node.name, id: s.node.id, index: i + 1, total: steps.length, step: 'skipped', message: `skipped: ${s.why}` });
      continue;
    }
    st.activated = false;
    try {
      await walkOne(s, i, steps.length, members, opts, st);
    } catch (err) {
      throw stopped(err, s.action === 'upgrade' ? 'upgrading' : 'rolling back', s.node, st, steps.slice(i).filter((x) => x.action !== 'skip').map((x) => x.node.name), again);
    }
    st.done.push(s.node.name);
  }
  return finalLevel(members);
}
