// A drill's report (docs/operations.md, "Failover drills"): what `shoal drill` prints, sends as
// JSON, and keeps in the store's reserved collection `shoal.drills` (POST/GET /v1/drills). One
// schema for the CLI that writes it and the API that checks it.

import { z } from 'zod';

export const drillsCollection = 'shoal.drills';
export const drillNames = ['leader-kill', 'leader-isolate', 'leader-pause', 'follower-pause', 'node-reboot', 'disk-stall'] as const;
export type DrillName = (typeof drillNames)[number];
/** Problems listed in one report at most (each a sentence). */
export const reportProblemsMax = 50;

const count = z.number().int().min(0);
const ms = z.number().min(0);

export const drillReportSchema = z.strictObject({
  id: z.string().regex(/^drill-[0-9a-z-]{1,100}$/, 'drill-<time>-<random>'),
  drill: z.enum(drillNames),
  startedAt: z.iso.datetime(),
  target: z.strictObject({ id: z.string().max(100), name: z.string().max(100) }),
  /** How long the fault lasted (isolate, pause, stall, reboot), or null (kill: until restarted). */
  faultSeconds: z.number().min(0).nullable(),
  leaderBefore: z.string().max(100).nullable(),
  leaderAfter: z.string().max(100).nullable(),
  /** From the fault to the first answer naming a leader of a later term (another node, or the same one re-elected); null when no election happened. */
  newLeaderMs: ms.nullable(),
  /** The longest time between two acknowledged probe writes while the drill ran. */
  longestWriteGapMs: ms,
  /**
   * Every probe write (creates of the ack log and writes of the register): attempted, answered
   * 200 (acknowledged), failed. `checked` of the acknowledged ones are the creates, each looked
   * for on every member at the end; `lost` of those are missing somewhere. (Reports kept before
   * `checked` existed lack it.)
   */
  writes: z.strictObject({ attempted: count, acknowledged: count, checked: count.optional(), failed: count, lost: count }),
  reads: z.strictObject({ done: count, failed: count, backwards: count }),
  workloads: z.strictObject({ runningBefore: count, runningAfter: count, restarted: count, duplicated: count }),
  /** From the fault until every service ran its replica count again; null: it never did in time. */
  servicesBackMs: ms.nullable(),
  /**
   * From the fault until the leader declared the target down (it raised the node's epoch and
   * replaced its tasks elsewhere); null: it did not. Absent from reports kept before the field.
   */
  targetDownMs: ms.nullable().optional(),
  /**
   * Peer messages the members' transports refused, during the drill, as no correct node ever
   * sends them: a \`from\` that is not the sender (wrong_sender), a \`to\` or relay origin that
   * cannot be (misaddressed). Any is a bug: the message was dropped, silently for Raft.
   * Absent from reports kept before the field.
   */
  peerMessagesRefused: z.strictObject({ wrongSender: count, misaddressed: count }).optional(),
  /** The target answered caught up and the cluster had a leader; recoveryMs from the fault. */
  recovered: z.boolean(),
  recoveryMs: ms.nullable(),
  problems: z.array(z.string().max(1000)).max(reportProblemsMax),
  /** Nothing lost, nothing went backwards or was duplicated, no peer message refused, the cluster recovered and its services came back. */
  ok: z.boolean(),
});
export type DrillReport = z.infer<typeof drillReportSchema>;
