// shoal service scale|update|rollback|rebalance: changes to a running service, each followed by a
// wait until the service has converged (--detach returns at once; converge.ts).

import { z } from 'zod';
import { renderService } from '../resources/spec/render.ts';
import { serviceSpecSchema } from '../resources/spec/service-spec.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { ApiError, CliFailure, request, resolveAddr, retryNotice } from './client.ts';
import { applyAnswerSchema, paths, read, rebalanceSchema, serviceDetailSchema, writtenServiceSchema } from './control-api.ts';
import { durationFlag, oneName, replicasArg } from './control-args.ts';
import { waitConverged, waitTimeoutDefault } from './converge.ts';
import { sameFailureAttempts } from './converge-verdict.ts';
import { finish, resolveImageFlag, resolveImageFlagText } from './apply.ts';
import { commonFlags, help } from './doc-common.ts';
import { commonFlagsText } from './group.ts';

const waitFlags = { ...commonFlags, detach: { type: 'boolean', default: false }, timeout: { type: 'string' } } as const;
const forceFlags = { ...waitFlags, force: { type: 'boolean', default: false } } as const;
const waitFlagsText = `  --detach               do not wait for the service to converge
  --timeout DURATION     how long to wait (default ${waitTimeoutDefault})
${commonFlagsText(23)}`;
const waitExitCodes = `While it waits it shows progress and why tasks do not run (and what the service's disruption
budget holds back), and it stops early when every task failed the same way ${sameFailureAttempts} times in a row
(or once, when the restart policy tries no more).
Exit codes: 0 done (and converged, unless --detach); 1 refused (not_found, bad_request: the message
says why) or not converged (not_converged: its update paused or rolled back, or the timeout
passed; disruption_budget: the timeout passed while its update waited for the disruption budget;
tasks_failing: every task failed the same way: the change stays made); 2 usage error;
3 no node answered, or the cluster cannot serve right now.`;
const forceFlagText = `  --force                the rolling update may go past the service's disruption budget
                         (recorded on the service, and as an event)`;

export const serviceScaleHelp = `Usage: shoal service scale NAME REPLICAS [--detach] [--timeout DURATION] [--addr HOST:PORT] [--json]
       shoal service scale NAME=REPLICAS ...

Sets how many tasks of a replicated service run (0 to 10,000), then waits until they do. Tasks
already running are kept; new ones are placed by the scheduler, extra ones are shut down.

Options:
${waitFlagsText}

With --json prints {outcome, rev, service} and, after waiting, converged.
${waitExitCodes}`;

export const serviceUpdateHelp = `Usage: shoal service update NAME [--image IMAGE] [--replicas N] [--env K=V]... [--env-rm K]...
                           [--resolve-image MODE] [--force] [--detach] [--timeout DURATION]
                           [--addr HOST:PORT] [--json]

Changes a service from flags: reads its spec, changes the fields given, and applies the result as
'shoal apply' does (strict: a bad value is refused with its path). A change of image or env
replaces the tasks by a rolling update (the spec's update policy); a change of replicas only
scales. The apply is a compare-and-set on the spec it read: if the service changes meanwhile,
it reads it again and reapplies the flags. Then it waits until the service has converged.
A new image tag is pinned to its digest as 'shoal apply' pins it; the current image keeps its
pin, unless --resolve-image always (which may be given alone: the image follows its tag).

Options:
  --image IMAGE          the container image
  --replicas N           the number of tasks
  --env K=V              set an environment variable (repeat for several)
  --env-rm K             remove an environment variable (repeat for several)
${resolveImageFlagText(23)}
${forceFlagText}
${waitFlagsText}

With --json prints the apply's answer ({dryRun, rev, services}) and, after waiting, converged.
${waitExitCodes}`;

export const serviceRollbackHelp = `Usage: shoal service rollback NAME [--force] [--detach] [--timeout DURATION] [--addr HOST:PORT] [--json]

Goes back to the service's previous spec: the current and previous specs swap, and a rolling
update replaces the tasks (a rollback of a rollback goes forward again), as the service's
disruption budget allows. Refused when the service has no previous spec (its spec never changed
in a way that replaced tasks). Then waits until the service has converged.

Options:
${forceFlagText}
${waitFlagsText}

With --json prints {specVersion, rev, service} and, after waiting, converged.
${waitExitCodes}`;

export const serviceRebalanceHelp = `Usage: shoal service rebalance NAME [--force] [--detach] [--timeout DURATION] [--addr HOST:PORT] [--json]

Spreads a service's tasks again, for instance after a node came back or was added (the leader
never moves running tasks by itself). One step at a time: it shuts down one task on the node
carrying the most tasks of the service, only if the scheduler would place the replacement on a
node carrying fewer, waits until the replacement runs, and takes the next step, until no step
helps. A binpack service and a global service are left as they are. Each task moved is stopped
before its replacement starts (stop-first), whatever the update order, so a step takes a slot
down: it waits while the service's disruption budget allows no more (a node down, a task
starting, an update or a drain under way), saying why.

Options:
  --force                move even past the disruption budget (recorded on the service)
  --detach               take one step and return
  --timeout DURATION     how long to keep going (default ${waitTimeoutDefault})
${commonFlagsText(23)}

With --json prints {moves: [...], state, reason, counts} (each step is POST /v1/services/NAME/rebalance).
Exit codes: 0 balanced (or one step taken, with --detach); 1 refused (not_found), or not balanced
within the timeout (not_converged; disruption_budget when the last step waited for the budget);
2 usage error; 3 no node answered, or the cluster cannot serve right now.`;

function waitOptions(values: { addr?: string | undefined; json: boolean; timeout?: string | undefined }, command: string): { addr: string; json: boolean; timeoutMs: number; command: string } {
  return { addr: resolveAddr(values.addr), json: values.json, timeoutMs: durationFlag(values.timeout, '--timeout', waitTimeoutDefault), command };
}

export async function serviceScaleCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, waitFlags, serviceScaleHelp);
  if (values.help) return help(serviceScaleHelp);
  const [first, second, ...rest] = positionals;
  const pair = first?.includes('=') === true && second === undefined ? first.split('=') : [first, second];
  const [name, count] = pair;
  if (name === undefined || name === '' || count === undefined || rest.length > 0 || pair.length !== 2) throw new UsageError(`expected NAME REPLICAS (or NAME=REPLICAS), got ${positionals.length === 0 ? 'nothing' : `'${positionals.join(' ')}'`}`);
  const replicas = replicasArg(count);
  const o = waitOptions(values, 'service scale');
  const { body } = await request(o.addr, 'POST', `${paths.service(name)}/scale`, writtenServiceSchema.extend({ outcome: z.string() }), {
    body: { replicas }, retry: 'safe', onRetry: retryNotice('service scale'),
  });
  if (!o.json) console.log(`${name}: ${body.outcome === 'unchanged' ? `already at ${replicas} replicas` : `scaled to ${replicas} replicas`}`);
  return waitAndPrint(body, name, values.detach, o);
}

/** Waits for one service after a change answered with its view; prints the answer (and the view) under --json. */
async function waitAndPrint(answer: z.infer<typeof writtenServiceSchema>, name: string, detach: boolean, o: ReturnType<typeof waitOptions>): Promise<number> {
  if (detach || answer.service === null) {
    if (o.json) console.log(JSON.stringify(answer, null, 2));
    return exitCodes.ok;
  }
  if (!o.json) console.error('waiting for the service to converge (--detach to return at once)');
  const [view] = await waitConverged([{ name, specVersion: answer.service.record.specVersion }], o);
  if (o.json) console.log(JSON.stringify({ ...answer, converged: view }, null, 2));
  else if (view !== undefined) console.log(`${name}: converged, ${view.status.running}/${view.status.desired} running`);
  return exitCodes.ok;
}

/** Each K=V of --env as a pair; a usage error names a bad one. */
function envPairs(items: readonly string[]): [string, string][] {
  return items.map((kv) => {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new UsageError(`--env takes K=V (a variable name, =, its value), got '${kv}'`);
    return [kv.slice(0, eq), kv.slice(eq + 1)];
  });
}

/** Rereads and reapplies this many times when the service changes between the read and the apply. */
const updateAttemptsMax = 5;

export async function serviceUpdateCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...forceFlags, image: { type: 'string' }, replicas: { type: 'string' }, env: { type: 'string', multiple: true }, 'env-rm': { type: 'string', multiple: true },
    'resolve-image': { type: 'string' },
  }, serviceUpdateHelp);
  if (values.help) return help(serviceUpdateHelp);
  const name = oneName(positionals);
  const env = envPairs(values.env ?? []);
  const envRm = values['env-rm'] ?? [];
  const replicas = values.replicas === undefined ? undefined : replicasArg(values.replicas, '--replicas');
  const resolveImage = resolveImageFlag(values['resolve-image']);
  // --resolve-image always alone is a change: the image follows its tag.
  if (values.image === undefined && replicas === undefined && env.length === 0 && envRm.length === 0 && resolveImage !== 'always') {
    throw new UsageError('nothing to change: give at least one of --image, --replicas, --env, --env-rm (or --resolve-image always)');
  }
  const o = waitOptions(values, 'service update');
  for (let attempt = 1; ; attempt++) {
    const detail = await read(o.addr, paths.service(name), serviceDetailSchema, 'service update');
    const spec = serviceSpecSchema.safeParse(detail.service.record.spec);
    if (!spec.success) throw new CliFailure(`the node answered a spec this shoal does not read (${spec.error.issues[0]?.message ?? ''}); is it another version?`, exitCodes.failed, 'bad_answer');
    const doc = renderService(spec.data);
    if (values.image !== undefined) doc.image = values.image;
    // The current image carries its pin, which apply keeps as the author's: "always" follows its tag again.
    else if (resolveImage === 'always' && typeof doc.image === 'string') doc.image = doc.image.split('@')[0] ?? doc.image;
    if (replicas !== undefined) doc.replicas = replicas;
    const docEnv: Record<string, string> = { ...spec.data.env, ...Object.fromEntries(env) };
    for (const k of envRm) delete docEnv[k];
    doc.env = docEnv;
    try {
      const { body } = await request(o.addr, 'POST', '/v1/apply', applyAnswerSchema, {
        query: { resolveImage },
        body: { documents: [doc], expectRevs: { [name]: detail.service.rev }, ...(values.force ? { force: true } : {}) }, retry: 'not-applied', onRetry: retryNotice('service update'),
      });
      return await finish(body, { ...o, wait: !values.detach });
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 'revision_mismatch' && attempt < updateAttemptsMax)) throw err;
      if (!o.json) console.error(`shoal service update: ${name} changed while it was being updated; reading it again`);
    }
  }
}

export async function serviceRollbackCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, forceFlags, serviceRollbackHelp);
  if (values.help) return help(serviceRollbackHelp);
  const name = oneName(positionals);
  const o = waitOptions(values, 'service rollback');
  // Not retried once it may have been applied: a second rollback would go forward again.
  const { body } = await request(o.addr, 'POST', `${paths.service(name)}/rollback`, writtenServiceSchema.extend({ specVersion: z.number() }), {
    ...(values.force ? { body: { force: true } } : {}), retry: 'not-applied', onRetry: retryNotice('service rollback'),
  });
  if (!o.json) console.log(`${name}: rolling back to spec version ${body.specVersion}`);
  return waitAndPrint(body, name, values.detach, o);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const stepPauseMs = 500;

export async function serviceRebalanceCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, forceFlags, serviceRebalanceHelp);
  if (values.help) return help(serviceRebalanceHelp);
  const name = oneName(positionals);
  const o = waitOptions(values, 'service rebalance');
  const deadline = Date.now() + o.timeoutMs;
  const moves: unknown[] = [];
  let said = '';
  for (;;) {
    const { body } = await request(o.addr, 'POST', `${paths.service(name)}/rebalance`, rebalanceSchema, {
      ...(values.force ? { body: { force: true } } : {}), retry: 'not-applied', onRetry: retryNotice('service rebalance'),
    });
    if (body.moved !== null) moves.push(body.moved);
    const waits = body.state === 'settling' || body.state === 'waiting';
    const line = body.state === 'moved' ? `${body.reason}${body.forced === true ? ' (past the disruption budget: --force)' : ''}` : body.state === 'settling' ? `waiting: ${body.reason}` : body.state === 'waiting' ? body.reason : `balanced: ${body.reason}`;
    if (!o.json && line !== said) (waits ? console.error : console.log)(line);
    said = line;
    if (body.state === 'balanced' || values.detach) {
      if (o.json) console.log(JSON.stringify({ moves, ...body }, null, 2));
      else console.log(body.counts.filter((c) => c.tasks > 0 || body.counts.length <= 7).map((c) => `${c.nodeName}: ${c.tasks}`).join('  '));
      return exitCodes.ok;
    }
    if (Date.now() > deadline) {
      const budget = body.state === 'waiting';
      throw new CliFailure(`not balanced within ${Math.round(o.timeoutMs / 1000)} s (${moves.length} task${moves.length === 1 ? '' : 's'} moved; ${body.reason}); run it again to go on${budget ? ', or with --force to go past the budget' : ''}`, exitCodes.failed, budget ? 'disruption_budget' : 'not_converged');
    }
    await sleep(stepPauseMs);
  }
}
