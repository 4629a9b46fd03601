// A minimal key-value state machine for the driver tests: small and obviously deterministic
// (results depend only on the entries applied).

import { Packr } from 'msgpackr';
import { z } from 'zod';
import type { AppliedEntry, StateMachine } from '../../src/base/state-machine.ts';

const packr = new Packr({ useRecords: false });

export const kvCommandSchema = z.object({ op: z.literal('put'), key: z.string().min(1).max(512), value: z.string().max(1 << 20) }).strict();
export type KvCommand = z.infer<typeof kvCommandSchema>;
const kvSnapshotSchema = z.array(z.tuple([z.string(), z.object({ value: z.string(), rev: z.number() })]));

export interface KvValue {
  value: string;
  rev: number;
}

export class KvStateMachine implements StateMachine {
  private data = new Map<string, KvValue>();

  static encode(cmd: KvCommand): Uint8Array {
    return packr.pack(cmd);
  }

  apply(entry: AppliedEntry): unknown {
    const cmd = kvCommandSchema.safeParse(unpackOrUndefined(entry.data));
    if (!cmd.success) return { error: 'invalid command' };
    this.data.set(cmd.data.key, { value: cmd.data.value, rev: entry.index });
    return { rev: entry.index };
  }

  get(key: string): KvValue | undefined {
    return this.data.get(key);
  }

  size(): number {
    return this.data.size;
  }

  snapshot(): Uint8Array {
    return packr.pack([...this.data.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }

  restore(data: Uint8Array): void {
    this.data = new Map(packr.unpack(data) as [string, KvValue][]);
  }

  /** Why restore() would not take `data`: it must be msgpack of [key, {value, rev}] pairs. */
  checkSnapshot(data: Uint8Array): string | undefined {
    let v: unknown;
    try {
      v = packr.unpack(data);
    } catch (err) {
      return `not msgpack: ${(err as Error).message}`;
    }
    return kvSnapshotSchema.safeParse(v).success ? undefined : 'not a list of [key, {value, rev}] pairs';
  }
}

/** Any bytes may be proposed: what is not msgpack is an invalid command like any other. */
function unpackOrUndefined(data: Uint8Array): unknown {
  try {
    return packr.unpack(data);
  } catch {
    return undefined;
  }
}
