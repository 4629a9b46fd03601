// The address book: where members are now, when that differs from the committed membership.
//
// The member records in the log hold each member's peer and API address. When a machine gets a
// new address and its node restarts, the records are wrong until a leader commits new ones, and
// without the right addresses there may be no leader. So a node keeps, per member id, the
// address that member last announced for itself (its hello, on a connection whose certificate
// names it) or at which its certificate answered (a probe of a hint), and dials that instead of
// the record's. An entry is only ever taken from the member itself: a peer cannot move another
// (docs/operations.md, "Changing addresses").
//
// Entries are dropped once the membership catches up: when the committed record equals the
// entry, or when the record changed since the entry was learned (the newer word is the log's).
// The book is kept in <data>/peer-addresses.json, so a second restart before the leader commits
// still dials the right places. It is a cache: a damaged file is set aside and the book starts
// empty.

import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { NodeId } from '../raft/types.ts';
import type { Logger } from '../log.ts';
import type { MemberRecord } from '../resources/membership.ts';
import { isHostPort } from '../base/host-port.ts';
import { compareText } from '../base/order.ts';

export const peerAddressFile = 'peer-addresses.json';

/** Entries kept at most (a cluster has three to seven members; the bound guards the file). */
export const peerAddressEntriesMax = 256;

const hostPort = z.string().max(300).refine(isHostPort, 'expected HOST:PORT');

const entrySchema = z.object({
  peerAddress: hostPort,
  apiAddress: hostPort.optional(),
  /** The record's peer address when the entry was learned: a record that moved since is newer. */
  over: z.string().max(300).optional(),
}).strict();

const fileSchema = z.object({ version: z.literal(1), entries: z.record(z.string().max(256), entrySchema) }).strict();

export type PeerAddressEntry = z.infer<typeof entrySchema>;

export class PeerAddressBook {
  private readonly entries = new Map<NodeId, PeerAddressEntry>();
  private readonly file: string;

  constructor(dataDir: string, private readonly log: Logger) {
    this.file = path.join(dataDir, peerAddressFile);
    this.load();
  }

  get(id: NodeId): PeerAddressEntry | undefined {
    return this.entries.get(id);
  }

  list(): [NodeId, PeerAddressEntry][] {
    return [...this.entries].sort(([a], [b]) => compareText(a, b));
  }

  /**
   * `member` said it is at `peerAddress` (and its API at `apiAddress`). The caller has checked
   * that the word is the member's own. Returns whether the book changed.
   */
  learn(member: MemberRecord, peerAddress: string, apiAddress?: string): boolean {
    if (!isHostPort(peerAddress) || (apiAddress !== undefined && !isHostPort(apiAddress))) return false;
    const had = this.entries.get(member.id);
    const api = apiAddress ?? (had?.peerAddress === peerAddress ? had.apiAddress : undefined);
    if (peerAddress === member.peerAddress && (api === undefined || api === member.apiAddress)) return this.delete(member.id);
    if (had?.peerAddress === peerAddress && had.apiAddress === api) return false;
    if (had === undefined && this.entries.size >= peerAddressEntriesMax) return false;
    this.entries.set(member.id, { peerAddress, ...(api !== undefined ? { apiAddress: api } : {}), over: member.peerAddress });
    this.save();
    return true;
  }

  /**
   * Drops what the committed membership made redundant (the record says the same) or outdated
   * (the record moved since the entry was learned), and entries of ids no longer members.
   * Returns whether the book changed.
   */
  reconcile(members: readonly MemberRecord[]): boolean {
    if (this.entries.size === 0 || members.length === 0) return false;
    const byId = new Map(members.map((m) => [m.id, m]));
    let changed = false;
    for (const [id, e] of [...this.entries]) {
      const m = byId.get(id);
      const caughtUp = m !== undefined && m.peerAddress === e.peerAddress && (e.apiAddress === undefined || e.apiAddress === m.apiAddress);
      const outdated = m !== undefined && e.over !== undefined && m.peerAddress !== e.over;
      if (m !== undefined && !caughtUp && !outdated) continue;
      this.entries.delete(id);
      changed = true;
    }
    if (changed) this.save();
    return changed;
  }

  private delete(id: NodeId): boolean {
    if (!this.entries.delete(id)) return false;
    this.save();
    return true;
  }

  private load(): void {
    if (!existsSync(this.file)) return;
    let problem: string | undefined;
    try {
      const parsed = fileSchema.safeParse(JSON.parse(readFileSync(this.file, 'utf8')));
      if (parsed.success) {
        for (const [id, e] of Object.entries(parsed.data.entries).slice(0, peerAddressEntriesMax)) this.entries.set(id, e);
        return;
      }
      problem = parsed.error.issues.map((i) => `${i.path.join('.') || '(top level)'}: ${i.message}`).join('; ');
    } catch (err) {
      problem = (err as Error).message;
    }
    const aside = `${this.file}.damaged`;
    renameSync(this.file, aside);
    this.log.warn(`${this.file} is damaged (${problem}); moved it to ${aside} and starting with an empty address book (the members' committed addresses and --peers still apply)`);
  }

  /** Written to a temporary name, synced and renamed: the file is the old book or the new one. */
  private save(): void {
    const tmp = `${this.file}.tmp`;
    const body = { version: 1, entries: Object.fromEntries(this.list()) };
    try {
      const fd = openSync(tmp, 'w', 0o600);
      try {
        writeFileSync(fd, `${JSON.stringify(body, null, 2)}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, this.file);
    } catch (err) {
      // The book in memory still serves this run; only a restart before the commit loses it.
      this.log.warn(`cannot write ${this.file}: ${(err as Error).message}; the learned addresses hold until this node restarts`);
    }
  }
}
