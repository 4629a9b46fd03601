// Waiting for services to converge after a change (apply, service update|scale|rollback): every
// service named runs as many tasks of its current spec as it asks for, none is stopping, and no
// update is in progress. Progress lines go to stderr when they change (not under --json). The
// wait fails (exit 1) when a service is removed, its spec changes under it (a rollback after a
// failed update, or another apply), its update pauses, or the timeout passes; it keeps polling
// through a cluster that cannot serve for a moment (no leader, a node restarting).

import { exitCodes } from './args.ts';
import { CliFailure, exitCodeOf, isClientFailure, request } from './client.ts';
import { serviceListSchema, type ServiceView } from './control-api.ts';
import { serviceProgress } from './control-format.ts';

export const waitTimeoutDefault = '5m';
const pollMs = 500;

export interface WaitTarget {
  name: string;
  /** The spec version the change left it at; another one means someone else changed it. */
  specVersion: number;
}

export interface WaitOptions {
  addr: string;
  command: string;
  json: boolean;
  timeoutMs: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Why `v` will not converge to what the change asked, or null while it may. */
function failure(v: ServiceView | undefined, t: WaitTarget): string | null {
  if (v === undefined) return `${t.name} was removed`;
  const u = v.record.updateStatus;
  if (v.record.specVersion !== t.specVersion) {
    return `${t.name} is now at spec version ${v.record.specVersion}, not ${t.specVersion}: ${u.state === 'rolling-back' || u.state === 'rolled-back' ? `its update failed and it is ${u.state}` : 'it was changed again'}${u.message !== null ? ` (${u.message})` : ''}`;
  }
  if (u.state === 'paused' || u.state === 'rollback-paused') return `${t.name}'s update is ${u.state}${u.message !== null ? `: ${u.message}` : ''}; fix the spec and apply it again, or: shoal service rollback ${t.name}`;
  return null;
}

/** Polls until every target converged; returns their views, or throws CliFailure. */
export async function waitConverged(targets: readonly WaitTarget[], o: WaitOptions): Promise<ServiceView[]> {
  const deadline = Date.now() + o.timeoutMs;
  const shown = new Map<string, string>();
  let last: ServiceView[] = [];
  let unreachable = false;
  for (;;) {
    try {
      const { body } = await request(o.addr, 'GET', '/v1/services', serviceListSchema, { timeoutMs: 5_000 });
      unreachable = false;
      last = targets.flatMap((t) => body.items.filter((x) => x.name === t.name));
      for (const t of targets) {
        const v = body.items.find((x) => x.name === t.name);
        const why = failure(v, t);
        if (why !== null) throw new CliFailure(`${why}\n  see: shoal service ps ${t.name}`, exitCodes.failed, 'not_converged');
        const line = v === undefined ? '' : serviceProgress(v);
        if (!o.json && shown.get(t.name) !== line) console.error(`  ${line}`);
        shown.set(t.name, line);
      }
      if (last.length === targets.length && last.every((v) => v.status.converged)) return last;
    } catch (err) {
      if (!isClientFailure(err) || err instanceof CliFailure || exitCodeOf(err) !== exitCodes.unavailable) throw err;
      if (!unreachable && !o.json) console.error(`shoal ${o.command}: ${err.message}; still waiting`);
      unreachable = true;
    }
    if (Date.now() > deadline) {
      const where = last.map(serviceProgress).join('\n  ');
      throw new CliFailure(`not converged within ${Math.round(o.timeoutMs / 1000)} s (the change was made and stays; the cluster keeps working on it):\n  ${where}\n  see: shoal service ps ${targets[0]?.name ?? 'NAME'}`, exitCodes.failed, 'not_converged');
    }
    await sleep(pollMs);
  }
}
