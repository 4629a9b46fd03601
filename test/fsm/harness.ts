// Test harness for the document store: feeds stamped commands as log entries with consecutive
// indexes (or chosen ones), so tests read as the commands they apply.

import { Packr } from 'msgpackr';
import { DocumentStore, encodeCommand, type Command, type CommandResult, type DocumentStoreOptions, type Stamped } from '../../fsm/index.ts';

export const rawPackr = new Packr({ useRecords: false });

export class Feeder {
  index = 0;
  ts = 1_000_000;
  /** The term of the entries fed next. */
  term = 1;
  /** The committed feature level the entries are applied at (1: as the first release; 2: leader-stamped log time, fences). */
  featureLevel = 1;

  constructor(readonly store: DocumentStore = new DocumentStore()) {}

  /** Applies a stamped command at the next index (or `skip` indexes later, as if no-ops came between). */
  stamped(s: Partial<Stamped> & { cmd: Command }, skip = 0): CommandResult {
    this.index += 1 + skip;
    return this.store.apply({ index: this.index, term: this.term, data: encodeCommand({ ts: this.ts, ...s }), ...this.levelFields() });
  }

  cmd(cmd: Command, extra: Omit<Partial<Stamped>, 'cmd'> = {}): CommandResult {
    return this.stamped({ cmd, ...extra });
  }

  /** Applies raw entry data (bypassing encodeCommand's validation). */
  raw(data: Uint8Array): CommandResult {
    this.index += 1;
    return this.store.apply({ index: this.index, term: this.term, data, ...this.levelFields() });
  }

  /** At level 2 the leader stamps log time: the feeder uses its `ts` for it. */
  private levelFields(): { featureLevel: number; logTimeMs?: number } {
    return this.featureLevel < 2 ? { featureLevel: this.featureLevel } : { featureLevel: this.featureLevel, logTimeMs: this.ts };
  }

  put(collection: string, id: string, doc: Record<string, unknown>, expect?: { rev: number } | { absent: true }): CommandResult {
    return this.cmd({ op: 'put', collection, id, doc: doc as never, ...(expect ? { expect } : {}) });
  }

  del(collection: string, id: string, expect?: { rev: number } | { absent: true }): CommandResult {
    return this.cmd({ op: 'delete', collection, id, ...(expect ? { expect } : {}) });
  }
}

export function feeder(opts?: DocumentStoreOptions): Feeder {
  return new Feeder(new DocumentStore(opts));
}

/** Narrows a result to success (fails the test with the error otherwise). */
export function ok<R extends CommandResult>(r: R): Extract<R, { ok: true }> {
  if (!r.ok) throw new Error(`expected ok, got ${r.error.code}: ${r.error.message}`);
  return r as Extract<R, { ok: true }>;
}

export function errorOf(r: CommandResult): { code: string; message: string; details?: Record<string, unknown> } {
  if (r.ok) throw new Error(`expected an error, got ok ${r.kind}`);
  return r.error;
}

export function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}
