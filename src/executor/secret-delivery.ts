// The agent's part in delivering secrets (docs/resources.md, "Secrets"): before a task's
// container is created, read each secret its spec names from the node's applied store (caught up
// with the leader: a create waits for the read barrier) and write the files (secret-files.ts);
// every pass, drop the files of tasks that have no container left and no operation under way.
//
// A secret that is not in the store, or files that cannot be written, fail the task's start
// with `secret_unavailable: …`, as a failed pull fails it with `image_pull_failed: …`; the
// leader replaces the task under its restart policy, so creating the secret lets the next one run.

import type { Logger } from '../log.ts';
import type { MountSpec, SecretRefSpec } from '../resources/spec/service-spec.ts';
import { labelKeys } from './labels.ts';
import type { ContainerInfo } from './runtime.ts';
import type { SecretFile, SecretFiles } from './secret-files.ts';
import { errorText } from './status-reporter.ts';

export interface SecretDelivery {
  /** A secret's bytes in this node's applied store; undefined when there is no such secret. */
  read(name: string): Uint8Array | undefined;
  files: SecretFiles;
}

export type Delivered = { ok: true; mounts: MountSpec[] } | { ok: false; message: string };

type TimedCall = <T>(what: string, f: () => Promise<T>) => Promise<T>;

/** Writes the files of a task's secrets; answers the mounts for its container, or why it cannot start. */
export async function deliverSecrets(d: SecretDelivery | undefined, taskId: string, refs: readonly SecretRefSpec[], call: TimedCall): Promise<Delivered> {
  if (refs.length === 0) return { ok: true, mounts: [] };
  if (d === undefined) return { ok: false, message: 'secret_unavailable: this node\'s agent delivers no secrets (it runs without a data directory)' };
  const files: SecretFile[] = [];
  const missing: string[] = [];
  for (const ref of refs) {
    const bytes = d.read(ref.name);
    if (bytes === undefined) missing.push(ref.name);
    else files.push({ target: ref.target, mode: ref.mode, bytes });
  }
  if (missing.length > 0) {
    return { ok: false, message: `secret_unavailable: no secret named ${missing.join(', ')} in the store; create it (shoal secret create NAME --from-file FILE) and the task's replacement will start` };
  }
  try {
    return { ok: true, mounts: await call('writing the secret files', () => d.files.write(taskId, files)) };
  } catch (err) {
    return { ok: false, message: `secret_unavailable: writing the secret files failed: ${errorText(err)}` };
  }
}

/**
 * Removes the secret files of every task with no container on the node and no operation under
 * way (`busy`, read before `containers` was listed, so a create in flight is in one or the other).
 */
export async function retainSecretFiles(d: SecretDelivery | undefined, containers: readonly ContainerInfo[], busy: ReadonlySet<string>, log: Logger): Promise<void> {
  if (d === undefined) return;
  const keep = new Set(busy);
  for (const c of containers) {
    const task = c.labels[labelKeys.task];
    if (task !== undefined) keep.add(task);
  }
  try {
    const removed = await d.files.retain(keep);
    if (removed.length > 0) log.debug(`agent: removed the secret files of ${removed.length} task(s) that no container uses any more: ${removed.join(', ')}`);
  } catch (err) {
    log.warn(`agent: removing unused secret files failed: ${errorText(err)}; trying again on the next pass`);
  }
}
