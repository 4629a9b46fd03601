// What `shoal upgrade` asks of one node, at that node's own API (the routes of
// src/api/upgrade-routes.ts, never forwarded): its releases, take this build, activate it (or
// roll back), and then whether it is back: running the release, caught up, healthy.

import { openAsBlob } from 'node:fs';
import { z } from 'zod';
import { exitCodes } from './args.ts';
import { apiErrorFrom, CliFailure, request, send, UnreachableError } from './client.ts';
import { clusterViewSchema, label, type View } from './cluster-view.ts';
import type { NodeReleases } from './upgrade-plan.ts';

/** A build may need an `npm install` on the node: its answer can take minutes. */
const sendTimeoutMs = 15 * 60_000;
const pollMs = 500;
/** Entries a member may trail the leader by and count as caught up (a write load keeps it moving). */
export const caughtUpLagEntriesMax = 100;

export interface Member {
  id: string;
  name: string;
  apiAddress: string;
}

const releaseSchema = z.object({ name: z.string(), version: z.string(), sha256: z.string(), nodeModules: z.string(), featureLevelMax: z.number().nullable().optional() }).loose();
const releasesSchema = z.object({
  node: z.string(), softwareVersion: z.string(), dir: z.string(),
  running: z.string().nullable(), current: z.string().nullable(), previous: z.string().nullable(), releases: z.array(releaseSchema),
}).loose();
export type ReleasesAnswer = z.infer<typeof releasesSchema>;

export async function releasesOf(m: Member, timeoutMs = 5000): Promise<ReleasesAnswer> {
  return (await request(m.apiAddress, 'GET', '/v1/upgrade', releasesSchema, { timeoutMs })).body;
}

export function nodeReleases(m: Member, r: ReleasesAnswer): NodeReleases {
  return {
    id: m.id, name: m.name, apiAddress: m.apiAddress, running: r.running, previous: r.previous,
    versions: Object.fromEntries(r.releases.map((x) => [x.name, x.version])),
    levels: Object.fromEntries(r.releases.flatMap((x) => (typeof x.featureLevelMax === 'number' ? [[x.name, x.featureLevelMax]] : []))),
  };
}

/** Streams the tarball from disk to the node (PUT /v1/upgrade/build); answers the release it kept. */
export async function sendBuild(m: Member, file: string, sha256: string): Promise<z.infer<typeof releaseSchema> & { existed?: boolean }> {
  const res = await send(m.apiAddress, '/v1/upgrade/build', {
    method: 'PUT', body: await openAsBlob(file), headers: { 'content-type': 'application/octet-stream', accept: 'application/json' },
    query: { sha256 }, signal: AbortSignal.timeout(sendTimeoutMs),
  });
  if (!res.ok) throw await apiErrorFrom(res, m.apiAddress);
  const parsed = z.object({ release: releaseSchema.extend({ existed: z.boolean().optional() }) }).loose().safeParse(await res.json());
  if (!parsed.success) throw new CliFailure(`${label(m)} answered the build in an unexpected shape; does it run a release with the upgrade routes?`, exitCodes.failed, 'bad_answer');
  return parsed.data.release;
}

const restartAnswer = z.object({ current: z.string(), previous: z.string().nullable(), restarting: z.boolean() }).loose();

export async function activate(m: Member, release: string): Promise<z.infer<typeof restartAnswer>> {
  return (await request(m.apiAddress, 'POST', '/v1/upgrade/activate', restartAnswer, { body: { release }, timeoutMs: 30_000 })).body;
}

export async function rollback(m: Member): Promise<z.infer<typeof restartAnswer>> {
  return (await request(m.apiAddress, 'POST', '/v1/upgrade/rollback', restartAnswer, { body: {}, timeoutMs: 30_000 })).body;
}

/** The cluster view from the first of `members` that answers (the one being restarted may not). */
export async function viewFromAny(members: readonly Member[]): Promise<View> {
  let last: unknown;
  for (const m of members) {
    try {
      return (await request(m.apiAddress, 'GET', '/v1/cluster', clusterViewSchema, { timeoutMs: 3000 })).body;
    } catch (err) {
      last = err;
    }
  }
  if (last instanceof Error) throw last;
  throw new CliFailure('no member to ask for the cluster view', exitCodes.unavailable, 'unreachable');
}

/** Why the cluster cannot lose a voter now, or undefined when it can (failure tolerance ≥ 1). */
export function toleranceProblem(view: View): string | undefined {
  const voters = view.members.filter((x) => x.role === 'voter');
  const healthy = voters.filter((x) => x.health === 'healthy').length;
  const quorum = Math.floor(voters.length / 2) + 1;
  if (view.view !== 'leader') return 'the view comes from a node that cannot reach the leader (no leader?)';
  if (healthy - 1 >= quorum) return undefined;
  const down = voters.filter((x) => x.health !== 'healthy').map((x) => `${label(x)} (${x.health})`);
  return `${healthy} of ${voters.length} voters are healthy and a quorum is ${quorum}: restarting one would stop the cluster${down.length > 0 ? `; not healthy: ${down.join(', ')}` : ' (a cluster of fewer than three voters cannot be upgraded without an outage)'}`;
}

/** Whether `m` is back: its process runs `release`, it has caught up, and the leader sees it healthy. */
async function isBack(m: Member, release: string, others: readonly Member[]): Promise<string | undefined> {
  let r: ReleasesAnswer;
  try {
    r = await releasesOf(m, 2000);
  } catch (err) {
    return err instanceof UnreachableError ? 'its API does not answer yet' : `its API answers ${(err as Error).message}`;
  }
  if (r.running !== release) return `it still runs ${r.running ?? 'a build outside its releases folder'}`;
  const ready = await send(m.apiAddress, '/readyz?sync', { signal: AbortSignal.timeout(3000) }).then((res) => res.ok, () => false);
  if (!ready) return 'it has not caught up with the leader yet';
  let view: View;
  try {
    view = await viewFromAny([m, ...others]);
  } catch {
    return 'no member answers with the cluster view';
  }
  const me = view.members.find((x) => x.id === m.id);
  if (view.view !== 'leader' || me === undefined) return 'the cluster has no leader right now';
  if (me.health !== 'healthy' || (me.lag ?? 0) > caughtUpLagEntriesMax) return `the leader sees it ${me.health}, ${me.lag ?? '?'} entries behind`;
  return undefined;
}

/** Waits until `m` is back on `release`; fails after `timeoutMs` saying what it was waiting for. */
export async function waitBack(m: Member, release: string, others: readonly Member[], timeoutMs: number, onWait: (why: string) => void): Promise<number> {
  const started = Date.now();
  let why: string | undefined = 'not asked yet';
  let told = '';
  while (Date.now() - started < timeoutMs) {
    why = await isBack(m, release, others);
    if (why === undefined) return Date.now() - started;
    if (why !== told) onWait(why);
    told = why;
    await new Promise((r) => setTimeout(r, pollMs));
  }
  const within = timeoutMs < 10_000 ? (timeoutMs / 1000).toFixed(1) : String(Math.round(timeoutMs / 1000));
  throw new CliFailure(`${m.name} did not come back on ${release} within ${within} s: ${why}`, exitCodes.failed, 'not_back');
}
