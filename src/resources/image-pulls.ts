// Pulls before a stop on another node (issue 40, docs/docker.md "Pull before stop"): the
// contract between the leader and the agent of the node a replacement will run on.
//
// When a stop-first replacement (a rolling update, a drain's move) will be placed on another node
// than the task it replaces, the leader writes `shoal.image-pulls/<old task id>` naming that node
// and the new image, and holds the old task's stop. That node's agent pulls the image and writes
// the request's state (`pulling` with the pull's progress, then `present` or `failed`), a
// compare-and-set on the request's revision and on its own epoch. The leader stops the old task
// once the state is `present` or `failed`, or once imagePullWaitMs passed since the request (a
// node that never answers costs the wait, never the update). The request stays while the old task
// stops, so the old node's agent knows not to pull the image itself, and goes with it.

import { z } from 'zod';

/** Pull requests (ImagePullRequest), by the id of the task whose stop waits for the pull. Written by the leader (the request) and the pulling node's agent (its state). */
export const imagePullsCollection = 'shoal.image-pulls';

/** The longest a stop waits for the pull of its replacement's image, on its own node or another (agent.ts, prePull). */
export const imagePullWaitMs = 60_000;

export type ImagePullState = 'requested' | 'pulling' | 'present' | 'failed';

export interface ImagePullRequest {
  /** The task whose stop waits for the pull (the one the new task replaces). */
  taskId: string;
  service: string;
  /** The node that pulls: where the replacement is to be placed. */
  nodeId: string;
  /** Its epoch when asked: a report of another epoch is refused, and the leader stops waiting once it moves. */
  nodeEpoch: number;
  image: string;
  /** The registry whose login the pull goes with (the spec's registryLogin, else the image's registry). */
  pullsWith: string;
  /** Leader log time (ms) of the request: the wait is counted from it. */
  requestedAt: number;
  state: ImagePullState;
  /** The pull's progress (`pulling`), or why it failed (`failed`); null otherwise. */
  message: string | null;
  updatedAt: number;
}

const nat = z.number().int().min(0);

export const imagePullRequestSchema = z.object({
  taskId: z.string().min(1).max(64),
  service: z.string().min(1),
  nodeId: z.string().min(1),
  nodeEpoch: nat,
  image: z.string().min(1).max(512),
  pullsWith: z.string().min(1).max(300),
  requestedAt: nat,
  state: z.enum(['requested', 'pulling', 'present', 'failed']),
  message: z.string().max(2_000).nullable(),
  updatedAt: nat,
}).strict();

/** Whether the pulling node has answered for good: the stop may go on. */
export function isPullSettled(r: ImagePullRequest): boolean {
  return r.state === 'present' || r.state === 'failed';
}
