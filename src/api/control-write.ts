// The write path of the control plane's routes. Every write is one transaction proposed at the
// control plane's feature level (a cluster mid-upgrade answers feature_not_enabled and nothing is
// written), and is a compare-and-set on the revisions the route read: the route reads the state,
// decides, and writes expecting what it read. When something it read changed meanwhile (the
// leader's loops write service and node records too), it reads again and decides again, a few
// times, as the leader's loops do.

import type { FastifyRequest } from 'fastify';
import { encodeCommand, InvalidCommandError, type TxnCommand } from '../../fsm/index.ts';
import { txnComparesMax, txnOpsMax } from '../../fsm/limits.ts';
import type { CommandResult } from '../../fsm/types.ts';
import { toTransactions, type Plan } from '../resources/changes.ts';
import { compatCommand } from '../resources/record-compat.ts';
import type { ControlState } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { readControl } from './control-views.ts';
import { badRequest } from './validate.ts';
import { callerStamp, stampLevel } from './write-path.ts';

/** Read-decide-write rounds before a write that keeps meeting changes gives up. */
export const casAttemptsMax = 5;

/** What one round decided: a plan to write (with a value for the answer), or an answer with nothing to write. */
export type Decision<T> = { plan: Plan; answer: T } | { plan: null; answer: T };

/** The outcome: the decision's answer and the revision of the write (null when nothing was written). */
export interface Written<T> {
  answer: T;
  rev: number | null;
}

/** The plan as one transaction: a control write is all or nothing. */
export function oneTransaction(plan: Plan): TxnCommand {
  if (plan.changes.length > txnOpsMax) {
    throw badRequest([{ path: 'body', message: `this writes ${plan.changes.length} records at once; one write changes at most ${txnOpsMax} (one transaction, so it is all or nothing): split it` }]);
  }
  if (plan.compares.length > txnComparesMax) {
    throw badRequest([{ path: 'body', message: `this write depends on ${plan.compares.length} records staying as read (the services, networks and secrets it names); one write checks at most ${txnComparesMax} (one transaction, so it is all or nothing): split it` }]);
  }
  const [txn] = toTransactions(plan);
  if (txn === undefined) throw new ShoalError('internal', 'an empty plan has no transaction');
  return txn;
}

async function proposeTxn(ctx: ApiContext, req: FastifyRequest, planned: TxnCommand): Promise<CommandResult> {
  // Written as members of an older release read it; what only newer ones read needs their level.
  const { cmd: txn, featureLevel } = compatCommand(planned);
  const stamp = callerStamp(ctx, req);
  let data: Uint8Array;
  try {
    data = encodeCommand({ cmd: txn, ts: Date.now(), ...stamp });
  } catch (err) {
    if (!(err instanceof InvalidCommandError)) throw err;
    throw badRequest(err.issues.map((i) => ({ path: i.path.startsWith('principal') ? 'headers.x-shoal-principal' : 'body', message: i.message })));
  }
  const { result } = await ctx.node.propose(data, { featureLevel: stampLevel(stamp, featureLevel) });
  return result as CommandResult;
}

/**
 * Reads the state (linearizable), decides, and writes the decision as one compare-and-set
 * transaction; decides again on a conflict, up to casAttemptsMax times.
 */
export async function decideAndWrite<T>(ctx: ApiContext, req: FastifyRequest, what: string, decide: (state: ControlState) => Decision<T>): Promise<Written<T>> {
  for (let attempt = 1; attempt <= casAttemptsMax; attempt++) {
    const state = await readControl(ctx, 'linearizable');
    const d = decide(state);
    if (d.plan === null || d.plan.changes.length === 0) return { answer: d.answer, rev: null };
    const result = await proposeTxn(ctx, req, oneTransaction(d.plan));
    if (result.ok && result.kind === 'txn' && result.succeeded) return { answer: d.answer, rev: result.rev };
    if (result.ok && result.kind === 'txn') continue;
    if (!result.ok && (result.error.code === 'revision_mismatch' || result.error.code === 'already_exists' || result.error.code === 'not_found')) continue;
    if (!result.ok) throw new ShoalError(result.error.code, result.error.message, result.error.details as Record<string, unknown> | undefined);
    throw new ShoalError('internal', `unexpected result ${result.kind}`);
  }
  throw new ShoalError('revision_mismatch', `${what}: the records it read kept changing (${casAttemptsMax} attempts); nothing was written, retry`, { attempts: casAttemptsMax });
}
