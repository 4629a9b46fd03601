// The node's writes to a replicated volume's record (issue 41): what it holds, what it dropped,
// the writer's last error. Each is a compare-and-set on the record's revision, re-read and
// retried when another node wrote it meanwhile (holders and the leader's placement all write
// it); a record that is gone (the service was removed) is left alone.

import type { DocumentStore } from '../../../fsm/index.ts';
import { encodeCommand } from '../../../fsm/index.ts';
import type { CommandResult, JsonObject } from '../../../fsm/types.ts';
import { ShoalError } from '../../errors.ts';
import type { Proposer } from '../../ports/proposer.ts';
import { compatCommand } from '../../resources/record-compat.ts';
import { sameVersion, volumeRecordSchema, volumesCollection, type VolumeRecord, type VolumeVersion } from '../../resources/volumes.ts';

/** Attempts of one compare-and-set before it gives up (the record kept changing). */
export const volumeWriteAttemptsMax = 5;

export class StoreVolumeWriter {
  constructor(
    private readonly node: Proposer, private readonly store: DocumentStore, private readonly self: string, private readonly now: () => number,
  ) {}

  /** The record as this node's applied store has it; undefined when absent or unreadable. */
  record(name: string): VolumeRecord | undefined {
    const parsed = volumeRecordSchema.safeParse(this.store.get(volumesCollection, name)?.doc);
    return parsed.success ? parsed.data : undefined;
  }

  recordHeld(name: string, node: string, versions: readonly VolumeVersion[]): Promise<void> {
    return this.update(name, (rec) => {
      const fresh = versions.filter((v) => !rec.held.some((c) => c.node === node && sameVersion(c.version, v)));
      return fresh.length === 0 ? null : { ...rec, held: [...rec.held, ...fresh.map((version) => ({ node, version, atMs: this.now() }))] };
    });
  }

  forgetHeld(name: string, node: string, versions: readonly VolumeVersion[]): Promise<void> {
    return this.update(name, (rec) => {
      const held = rec.held.filter((c) => c.node !== node || !versions.some((v) => sameVersion(v, c.version)));
      return held.length === rec.held.length ? null : { ...rec, held };
    });
  }

  /** Takes `versions` off the record's list of `node`'s copies the operator removed: the node deleted them. */
  finishRemoval(name: string, node: string, versions: readonly VolumeVersion[]): Promise<void> {
    return this.update(name, (rec) => {
      const removing = (rec.removing ?? []).filter((r) => r.node !== node || !versions.some((v) => sameVersion(v, r.version)));
      if (removing.length === (rec.removing ?? []).length) return null;
      const { removing: _old, ...rest } = rec;
      return removing.length === 0 ? rest : { ...rest, removing };
    });
  }

  recordError(name: string, message: string | null): Promise<void> {
    return this.update(name, (rec) => {
      if (message === null) return rec.lastError === null ? null : { ...rec, lastError: null };
      return rec.lastError?.message === message ? null : { ...rec, lastError: { atMs: this.now(), message } };
    });
  }

  /** Applies `change` to the current record by compare-and-set; null from it: nothing to write. */
  private async update(name: string, change: (rec: VolumeRecord) => VolumeRecord | null): Promise<void> {
    for (let attempt = 0; attempt < volumeWriteAttemptsMax; attempt++) {
      const doc = this.store.get(volumesCollection, name);
      const rec = this.record(name);
      if (doc === undefined || rec === undefined) return;
      const next = change(rec);
      if (next === null) return;
      const r = await this.propose({ op: 'put', collection: volumesCollection, id: name, doc: next as unknown as JsonObject, expect: { rev: doc.rev } });
      if (r.ok) return;
      if (r.error.code !== 'revision_mismatch') throw new ShoalError(r.error.code === 'invalid_command' ? 'internal' : 'bad_request', r.error.message);
    }
    throw new ShoalError('timeout', `could not update volume ${name}'s record: it kept changing`);
  }

  private async propose(cmd: Parameters<typeof encodeCommand>[0]['cmd']): Promise<CommandResult> {
    const compat = compatCommand(cmd);
    const data = encodeCommand({ cmd: compat.cmd, ts: this.now(), principal: `shoal:agent:${this.self}` });
    const { result } = await this.node.propose(data, { featureLevel: compat.featureLevel });
    return result as CommandResult;
  }
}
