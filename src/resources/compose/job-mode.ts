// Compose's `deploy.mode: replicated-job` (as `docker stack deploy` takes it): the service
// compiled as usual (compile.ts), then made a shoal Job (src/resources/spec/job-spec.ts): one task
// per run, no schedule, run once when the stack deploy creates it and again when a deploy changes
// it (src/api/stack-routes.ts adds the run in the same transaction), as Swarm runs a job when it is
// created or updated. What a Job cannot carry is refused by name, or warned when it has no effect:
//
//   replicas (completions) other than 1   refused: a shoal run is one task
//   ports                                 refused: a job publishes nothing
//   healthcheck, update_config,           warned: no effect (a run succeeds when its container
//   placement.preferences/max_replicas    exits 0; there is nothing to roll or spread)
//   restart / restart_policy              condition none → backoffLimit 0; on-failure[:N] →
//                                         backoffLimit N (3 when unsaid); any/always refused
//   depends_on (either way)               refused: depends_on orders services, a job is not one
//
// `global-job` (one run per node) is refused by compile.ts with what to write instead.

import { keyPath } from '../spec/reader.ts';

/** The compose mode that compiles to a Job. */
export const jobMode = 'replicated-job';

interface JobCtx {
  refuse(at: string, message: string): void;
  warn(at: string, message: string): void;
}

/** The Service document `doc` (compiled from the compose service at `at`) as a Job document; problems go to `ctx`. */
export function asJobDocument(ctx: JobCtx, doc: Record<string, unknown>, at: string, opts: { hasDependsOn: boolean; restartAt: string }): Record<string, unknown> {
  const { mode: _mode, replicas, ports, healthCheck, update, maxPerNode, placement, restart, ...rest } = doc;
  const job: Record<string, unknown> = { ...rest, kind: 'Job' };
  if (replicas !== undefined && replicas !== 1) {
    ctx.refuse(`${at}.deploy.replicas`, `a ${jobMode} of ${JSON.stringify(replicas)} completions is not supported: a shoal job runs one task per run; set replicas: 1 (or leave it out), or write one service per task`);
  }
  if (Array.isArray(ports) && ports.length > 0) ctx.refuse(`${at}.ports`, `a ${jobMode} publishes no ports: a shoal job's task runs to its end; remove ports, or make it a service`);
  if (healthCheck !== undefined) ctx.warn(`${at}.healthcheck`, 'accepted with no effect for a job: a run succeeds when its container exits 0');
  if (update !== undefined) ctx.warn(`${at}.deploy.update_config`, 'accepted with no effect for a job: a changed job runs again with its new spec');
  if (maxPerNode !== undefined) ctx.warn(`${at}.deploy.placement.max_replicas_per_node`, 'accepted with no effect for a job: a run is one task');
  if (placement !== undefined) ctx.warn(`${at}.deploy.placement.preferences`, 'accepted with no effect for a job: a run is one task');
  if (rest.networkAliases !== undefined) {
    delete job.networkAliases;
    ctx.refuse(`${at}.networks`, `a ${jobMode} takes no network aliases: a run's task is not a name others look up (a shoal Job has no networkAliases); remove the aliases, or make it a service`);
  }
  if (opts.hasDependsOn) ctx.refuse(`${at}.depends_on`, `a ${jobMode} cannot wait for services: depends_on orders services only; start the job once they run (shoal job run NAME)`);
  if (restart !== undefined && restart !== null && typeof restart === 'object') {
    const r = restart as { condition?: unknown; maxAttempts?: unknown; delay?: unknown };
    const said = r.condition === 'always' ? (opts.restartAt.endsWith('.restart') ? 'always or unless-stopped' : 'any') : String(r.condition);
    if (r.condition === 'never') job.backoffLimit = 0;
    else if (r.condition === 'on-failure') {
      if (r.maxAttempts !== undefined) job.backoffLimit = r.maxAttempts;
    } else {
      ctx.refuse(opts.restartAt, `a job's failed run is retried, a run that succeeded is not: write condition: on-failure (with max_attempts) or none, not ${said}`);
    }
    if (r.delay !== undefined) ctx.warn(`${at}.deploy.restart_policy.delay`, 'accepted with no effect for a job: a failed run is retried at once');
  }
  return job;
}

/** A service's depends_on naming a job: refused (depends_on orders services; a job runs at each deploy that changes it). */
export function refuseDependsOnJobs(ctx: JobCtx, deps: readonly string[], at: string, services: Readonly<Record<string, unknown>>): void {
  for (const dep of deps) {
    const other = services[dep];
    const deploy = other !== null && typeof other === 'object' ? (other as { deploy?: unknown }).deploy : undefined;
    if (deploy !== null && typeof deploy === 'object' && (deploy as { mode?: unknown }).mode === jobMode) {
      ctx.refuse(keyPath(at, dep), `${dep} is a ${jobMode}: depends_on orders services, not jobs; remove it (the job runs at each deploy that changes it)`);
    }
  }
}
