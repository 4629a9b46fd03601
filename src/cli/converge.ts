// Waiting for services to converge after a change (apply, service update|scale|rollback): every
// service named runs as many tasks of its current spec as it asks for, none is stopping, and no
// update is in progress. Progress goes to stderr when it changes (not under --json): the status
// line and why tasks are not running (converge-verdict.ts). The wait fails (exit 1) when a
// service is removed, its spec changes under it (a rollback after a failed update, or another
// apply), its update pauses (`not_converged`), when every task of a service has failed the same
// way a few times (`tasks_failing`, converge-verdict.ts), or when the timeout passes; it keeps
// polling through a cluster that cannot serve for a moment (no leader, a node restarting). A
// service whose update waits for its disruption budget shows why while it waits, and a timeout
// that ends such a wait says so (`disruption_budget`): the change stays, and the leader goes on as
// the budget allows.

import { exitCodes } from './args.ts';
import { ApiError, CliFailure, exitCodeOf, isClientFailure, request } from './client.ts';
import { paths, serviceDetailSchema, type ServiceView, type TaskItem } from './control-api.ts';
import { verdictOf, type WaitTarget } from './converge-verdict.ts';

export type { WaitTarget } from './converge-verdict.ts';

export const waitTimeoutDefault = '5m';
const pollMs = 500;

export interface WaitOptions {
  addr: string;
  command: string;
  json: boolean;
  timeoutMs: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A service and its tasks, or undefined when there is no such service (any more). */
async function readService(addr: string, name: string): Promise<{ service: ServiceView; tasks: TaskItem[] } | undefined> {
  try {
    const { body } = await request(addr, 'GET', paths.service(name), serviceDetailSchema, { timeoutMs: 5_000 });
    return body;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'not_found') return undefined;
    throw err;
  }
}

/** Polls until every target converged; returns their views, or throws CliFailure. */
export async function waitConverged(targets: readonly WaitTarget[], o: WaitOptions): Promise<ServiceView[]> {
  const deadline = Date.now() + o.timeoutMs;
  const shown = new Map<string, string>();
  const last = new Map<string, string[]>();
  const budgetWaits = new Map<string, string | null>();
  let unreachable = false;
  for (;;) {
    try {
      const views: ServiceView[] = [];
      for (const t of targets) {
        const state = await readService(o.addr, t.name);
        const verdict = verdictOf(t, state);
        if (verdict.stop !== null) throw new CliFailure(`${verdict.stop.message}\n  see: shoal service ps ${t.name}`, exitCodes.failed, verdict.stop.code);
        const text = verdict.lines.join('\n  ');
        if (!o.json && shown.get(t.name) !== text) console.error(`  ${text}`);
        shown.set(t.name, text);
        last.set(t.name, verdict.lines);
        budgetWaits.set(t.name, verdict.budgetWait);
        if (state !== undefined && verdict.converged) views.push(state.service);
      }
      unreachable = false;
      if (views.length === targets.length) return views;
    } catch (err) {
      if (!isClientFailure(err) || err instanceof CliFailure || exitCodeOf(err) !== exitCodes.unavailable) throw err;
      if (!unreachable && !o.json) console.error(`shoal ${o.command}: ${err.message}; still waiting`);
      unreachable = true;
    }
    if (Date.now() > deadline) {
      const where = [...last.values()].map((l) => l.join('\n    ')).join('\n  ');
      const held = [...budgetWaits.values()].filter((w): w is string => w !== null);
      if (held.length > 0) {
        throw new CliFailure(`not converged within ${Math.round(o.timeoutMs / 1000)} s, ${held.join('; ')}\n  the change was made and stays; the leader goes on as the budget allows (when the unavailable slots serve again). To go past the budget: apply again with --force\n  see: shoal service inspect ${targets[0]?.name ?? 'NAME'}`, exitCodes.failed, 'disruption_budget');
      }
      throw new CliFailure(`not converged within ${Math.round(o.timeoutMs / 1000)} s (the change was made and stays; the cluster keeps working on it):\n  ${where}\n  see: shoal service ps ${targets[0]?.name ?? 'NAME'}`, exitCodes.failed, 'not_converged');
    }
    await sleep(pollMs);
  }
}
