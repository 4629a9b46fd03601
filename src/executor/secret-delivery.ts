// The agent's part in delivering secrets (docs/resources.md, "Secrets"): before a task's
// container is created, read each secret its spec names from the node's applied store (caught up
// with the leader: a create waits for the read barrier), decrypted with its data key (unwrapped
// here by a voter, or handed over by one for this task: src/server/secret-source.ts), and write
// the files (secret-files.ts, on a tmpfs); every pass, drop the files of tasks that have no
// container left and no operation under way.
//
// A secret that is not in the store, or files that cannot be written, fail the task's start
// with `secret_unavailable: …`, as a failed pull fails it with `image_pull_failed: …`; the
// leader replaces the task under its restart policy, so creating the secret lets the next one run.
// A secret that exists but cannot be decrypted now (the node is autolocked, no voter answers)
// does not fail the task: it waits, `starting` with the reason, and is tried again.

import type { Logger } from '../log.ts';
import type { MountSpec, SecretRefSpec } from '../resources/spec/service-spec.ts';
import { labelKeys } from './labels.ts';
import type { ContainerInfo } from './runtime.ts';
import type { SecretFile, SecretFiles } from './secret-files.ts';
import { errorText } from './status-reporter.ts';

/** A secret's value for a task, or why not: `wait` when it may be readable later without any change to the store. */
export type SecretRead = { ok: true; bytes: Uint8Array } | { ok: false; wait: boolean; message: string };

export interface SecretDelivery {
  /** The value of the secret `name` in this node's applied store, for task `taskId`. */
  read(name: string, taskId: string): Promise<SecretRead>;
  files: SecretFiles;
}

export type Delivered = { ok: true; mounts: MountSpec[] } | { ok: false; wait: boolean; message: string };

type TimedCall = <T>(what: string, f: () => Promise<T>) => Promise<T>;

/** Writes the files of a task's secrets; answers the mounts for its container, or why it cannot start. */
export async function deliverSecrets(d: SecretDelivery | undefined, taskId: string, refs: readonly SecretRefSpec[], call: TimedCall): Promise<Delivered> {
  if (refs.length === 0) return { ok: true, mounts: [] };
  if (d === undefined) return { ok: false, wait: false, message: 'secret_unavailable: this node\'s agent delivers no secrets (it runs without a data directory)' };
  const files: SecretFile[] = [];
  const missing: string[] = [];
  const waits: string[] = [];
  for (const ref of refs) {
    const r = await d.read(ref.name, taskId);
    if (r.ok) files.push({ target: ref.target, mode: ref.mode, ...(ref.uid !== undefined ? { uid: ref.uid } : {}), ...(ref.gid !== undefined ? { gid: ref.gid } : {}), bytes: r.bytes });
    else if (r.wait) waits.push(r.message);
    else missing.push(r.message);
  }
  try {
    if (missing.length > 0) return { ok: false, wait: false, message: `secret_unavailable: ${missing.join('; ')}` };
    if (waits.length > 0) return { ok: false, wait: true, message: `waiting for secrets: ${waits.join('; ')}` };
    return { ok: true, mounts: await call('writing the secret files', () => d.files.write(taskId, files)) };
  } catch (err) {
    return { ok: false, wait: false, message: `secret_unavailable: writing the secret files failed: ${errorText(err)}` };
  } finally {
    // Decrypted values live only in the files (tmpfs) from here on.
    for (const f of files) f.bytes.fill(0);
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
