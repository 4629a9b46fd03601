// Member records: the name and addresses of each member, replicated through the log so that
// nodes find each other by id, never by a configured address. Founding members come from the
// bootstrap snapshot; a node added later arrives in the context of its conf change.

import { z } from 'zod';
import type { ConfChange, ConfState, NodeId } from '../raft/types.ts';
import { compareText } from '../base/order.ts';

export const memberRecordSchema = z.object({
  id: z.string().min(1),
  name: z.string().min(1),
  peerAddress: z.string().min(1),
  apiAddress: z.string().min(1),
}).strict();

export type MemberRecord = z.infer<typeof memberRecordSchema>;

const contextSchema = z.object({ members: z.array(memberRecordSchema) }).strict();

export function confChangeContext(members: MemberRecord[]): string {
  return JSON.stringify({ members });
}

export class Membership {
  private readonly records = new Map<NodeId, MemberRecord>();

  list(): MemberRecord[] {
    return [...this.records.values()].sort((a, b) => compareText(a.id, b.id));
  }

  get(id: NodeId): MemberRecord | undefined {
    return this.records.get(id);
  }

  restore(records: readonly MemberRecord[]): void {
    this.records.clear();
    for (const r of records) this.records.set(r.id, { ...r });
  }

  /** Records the members a committed conf change introduces. Deterministic on every node. */
  applyConfChange(cc: ConfChange): void {
    if (!cc.context) return;
    const parsed = contextSchema.safeParse(safeJson(cc.context));
    if (parsed.success) for (const r of parsed.data.members) this.records.set(r.id, r);
  }

  /**
   * Drops the records of nodes that left the configuration. Called with the membership in effect
   * after applying: a removed voter stays reachable while it is still in the outgoing half of a
   * joint configuration, whose quorum needs it.
   */
  retain(cs: ConfState): void {
    const keep = new Set([...cs.voters, ...cs.votersOutgoing, ...cs.learners, ...cs.learnersNext]);
    for (const id of [...this.records.keys()]) if (!keep.has(id)) this.records.delete(id);
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
