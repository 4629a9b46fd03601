// What the agent asks before it creates the container of a task with a replicated volume
// (issue 41, docs/volumes.md): the volume's record must name this node, in its current epoch,
// as the writer (the era the placement wrote); then the engine makes the live volume for that
// era (restoring the newest complete copy, or keeping this node's own live volume on a restart
// in place), and the mount becomes a bind of the live volume. Until the record says so the task
// waits; a version this node does not hold fails the start (the placement chose a holder, so
// this means the copy was lost here).

import { isShoalError } from '../../errors.ts';
import type { MountSpec } from '../../resources/spec/service-spec.ts';
import { currentWriter, type VolumeRecord } from '../../resources/volumes.ts';
import type { VolumeEngine } from './volume-engine.ts';

export type VolumeAnswer = { ok: true; mounts: MountSpec[] } | { ok: false; wait: boolean; message: string };

export interface TaskVolumes {
  /** The task's mounts with each replicated volume ready and bound, or why it waits or fails. */
  prepare(node: { id: string; epoch: number }, mounts: readonly MountSpec[]): Promise<VolumeAnswer>;
}

export class EngineTaskVolumes implements TaskVolumes {
  constructor(private readonly engine: VolumeEngine, private readonly record: (name: string) => VolumeRecord | undefined) {}

  async prepare(node: { id: string; epoch: number }, mounts: readonly MountSpec[]): Promise<VolumeAnswer> {
    const out: MountSpec[] = [];
    for (const m of mounts) {
      if (m.replicate === undefined) {
        out.push(m);
        continue;
      }
      const rec = this.record(m.source);
      const writer = rec === undefined ? null : currentWriter(rec);
      const era = rec?.eras.at(-1);
      if (rec === undefined || era === undefined || writer === null || writer.node !== node.id || writer.epoch !== node.epoch) {
        return { ok: false, wait: true, message: `waiting for volume ${m.source}'s record to name this node (epoch ${node.epoch}) its writer` };
      }
      const previous = rec.eras.at(-2);
      try {
        await this.engine.prepareForEra(m.source, m.replicate.sizeBytes, era, previous !== undefined && previous.node === node.id);
      } catch (err) {
        if (isShoalError(err) && err.code === 'volume_no_copy') return { ok: false, wait: false, message: `${err.code}: ${err.message}` };
        if (isShoalError(err)) return { ok: false, wait: true, message: `${err.code}: ${err.message}` };
        throw err;
      }
      out.push({ type: 'bind', source: this.engine.livePath(m.source), target: m.target, readOnly: false });
    }
    return { ok: true, mounts: out };
  }
}
