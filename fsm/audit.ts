// Audit records: one document in `shoal.audit` for each client mutation, written by apply itself.
//
// A record is derived from the entry (its stamped command, the result apply computed, its index,
// term and log time), so every node writes the same record at the same index, and a record cannot
// disagree with what happened: it is written in the same apply as the change it describes. Only
// from feature level 4 (src/base/feature-level.ts), so a node of an older release never meets a
// state it would not have produced.
//
// Not recorded: the node's own writes (principal `shoal` or `shoal:...`: leader loops, agents,
// the event log) and commands without a principal, entries that do not decode (invalid_command;
// they name no one), and idempotent replays (the answer of an earlier mutation, not a new one).
// Recorded: every other decoded command, whether it changed anything or was refused (its code).
// From feature level 5 the record also says the role the API authenticated the sender with:
// apply reads it from the stamped command, which carries it only from that level (the API stamps
// it then, and apply refuses a command naming a role below it: fsm/store.ts).

import type { Command, Stamped } from './command.ts';
import type { CommandResult, JsonObject } from './types.ts';

export const auditCollection = 'shoal.audit';

/** Resources a record names; a txn touching more lists these and counts the rest. */
export const auditResourcesMax = 20;

/** Digits of a record id: the zero-padded log index, so ids sort as the log does (2^53 has 16). */
const auditIdDigits = 16;

export function auditId(index: number): string {
  return String(index).padStart(auditIdDigits, '0');
}

/** Whether the entry's command is a client mutation to record. */
export function isAudited(stamped: Stamped, result: CommandResult): boolean {
  const p = stamped.principal;
  if (p === undefined || p === 'shoal' || p.startsWith('shoal:')) return false;
  return result.replayed !== true;
}

/** The documents a command changed or meant to change: for a txn, the branch that ran. */
function resourcesOf(cmd: Command, result: CommandResult): string[] {
  switch (cmd.op) {
    case 'put':
    case 'delete': return [`${cmd.collection}/${cmd.id}`];
    case 'retain': return [cmd.collection];
    case 'compact': return [];
    case 'txn': {
      const branch = result.ok ? (result.kind === 'txn' && !result.succeeded ? 'failure' : 'success') : result.error.details?.branch;
      const ops = branch === 'failure' ? cmd.failure : branch === 'success' ? cmd.success : [...cmd.success, ...cmd.failure];
      return [...new Set(ops.map((o) => `${o.collection}/${o.id}`))];
    }
  }
}

export interface AuditAt {
  index: number;
  term: number;
  logTimeMs: number;
}

/** The record's document: who, what, which resources, the result, and where in the log. */
export function auditRecord(stamped: Stamped, result: CommandResult, at: AuditAt): JsonObject {
  const resources = resourcesOf(stamped.cmd, result);
  const doc: JsonObject = {
    principal: stamped.principal ?? '',
    ...(stamped.role !== undefined ? { role: stamped.role } : {}),
    op: stamped.cmd.op,
    resources: resources.slice(0, auditResourcesMax),
    resourceCount: resources.length,
    result: result.ok ? 'ok' : result.error.code,
    term: at.term,
    index: at.index,
    timeMs: at.logTimeMs,
  };
  if (stamped.cmd.op === 'txn' && result.ok && result.kind === 'txn') doc.succeeded = result.succeeded;
  if (stamped.idempotencyKey !== undefined) doc.idempotencyKey = stamped.idempotencyKey;
  return doc;
}
