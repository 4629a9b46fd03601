// Replicated volumes in the placement pass (issue 41, docs/volumes.md): a pending task whose
// spec replicates a volume may only go where the volume's data is (resources/volumes.ts,
// volumePlacement), and placing it begins the new writer's era in the volume's record, in the
// same transaction as the task's assignment (compared on the record's revision), so from that
// commit on every holder refuses the old writer's increments.

import { putChange, type Change } from '../resources/changes.ts';
import type { NodeRecord } from '../resources/records.ts';
import type { MountSpec, ReplicateSpec, ServiceSpec } from '../resources/spec/service-spec.ts';
import type { ControlState } from '../resources/state.ts';
import { appendEra, beginEra, currentWriter, versionName, volumePlacement, volumesCollection, type VolumeRecord } from '../resources/volumes.ts';
import type { VolumeNodes } from './scheduler/types.ts';

type Replicated = MountSpec & { replicate: ReplicateSpec };

export function replicatedMounts(spec: ServiceSpec): Replicated[] {
  return spec.mounts.filter((m): m is Replicated => m.type === 'volume' && m.replicate !== undefined);
}

/** Where the spec's task may start for its replicated volumes (the nodes every one of them allows); undefined: anywhere. */
export function volumeNodesFor(state: ControlState, spec: ServiceSpec): VolumeNodes | undefined {
  let out: VolumeNodes | undefined;
  for (const m of replicatedMounts(spec)) {
    const rec = state.volumes?.get(m.source)?.value;
    if (rec === undefined) continue;
    const p = volumePlacement(rec);
    if (p.kind === 'any') continue;
    // A writer's node that is up keeps the task (its live volume is newer than any copy): a
    // container that exited is not moved onto an older copy. Down, suspect, paused or draining,
    // the holders may take it.
    const writer = state.nodes.get(currentWriter(rec)?.node ?? '')?.value;
    const nodes = writer !== undefined && writer.state === 'ready' && writer.availability === 'active' ? [writer.id] : p.nodes;
    const mine: VolumeNodes = { name: m.source, nodes, version: p.version === null ? null : versionName(p.version) };
    out = out === undefined ? mine : {
      name: `${out.name}, ${mine.name}`,
      nodes: out.nodes.filter((n) => mine.nodes.includes(n)),
      version: [out.version, mine.version].filter((v) => v !== null).join(', ') || null,
    };
  }
  return out;
}

/** The record writes that begin the new writer's era on `node` for each replicated volume of the spec. */
export function eraChanges(state: ControlState, spec: ServiceSpec, node: NodeRecord): Change[] {
  const changes: Change[] = [];
  for (const m of replicatedMounts(spec)) {
    const found = state.volumes?.get(m.source);
    const settings = { service: spec.name, copies: m.replicate.copies, everyMs: m.replicate.everyMs, sizeBytes: m.replicate.sizeBytes };
    if (found === undefined) {
      const rec: VolumeRecord = { name: m.source, ...settings, eras: [{ node: node.id, epoch: node.epoch, fromSeq: 1, base: null }], held: [], lastError: null };
      changes.push(putChange(volumesCollection, m.source, rec, null));
      continue;
    }
    const era = beginEra(found.value, node.id, node.epoch);
    if (era === null) continue;
    changes.push(putChange(volumesCollection, m.source, { ...found.value, ...settings, eras: appendEra(found.value, era) }, found.rev));
  }
  return changes;
}
