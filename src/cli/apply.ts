// shoal apply -f FILE: send a spec file (YAML or JSON, several documents) to POST /v1/apply, show
// what each service does (created, updated: scaled or replaced, unchanged), then wait until every
// service in the file has converged, showing progress (--detach returns at once).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { exitCodes, parse, UsageError } from './args.ts';
import { request, resolveAddr, retryNotice } from './client.ts';
import { applyAnswerSchema, pinnedLine, type ApplyAnswer, type ApplyOutcome } from './control-api.ts';
import { durationFlag } from './control-args.ts';
import { waitConverged, waitTimeoutDefault } from './converge.ts';
import { sameFailureAttempts } from './converge-verdict.ts';
import { commonFlags, help } from './doc-common.ts';
import { commonFlagsText } from './group.ts';

export const applyHelp = `Usage: shoal apply -f FILE [--dry-run] [--prune] [--source NAME] [--force] [--resolve-image always|changed|never] [--detach] [--timeout DURATION] [--addr HOST:PORT] [--json]

Applies the Service specs in FILE (YAML, several documents separated by ---, or JSON; '-f -' reads
standard input) and shows what each service does: created, updated (scaled, or its tasks replaced
by a rolling update) or unchanged. The specs are strict: any problem refuses the whole file,
every problem is listed with its path, and nothing is applied. Services the file does not name
are left alone, unless --prune: then the services this file created before (recorded with its
source name) and no longer names are removed, and nothing else. Then it waits until every service of the file has converged (as many tasks of
its current spec running as it asks for, and no update in progress), showing progress and why
tasks do not run (a failed pull with the registry's answer, an exit, a failing health check, no
node that fits and why). It stops early when every task of a service has failed the same way
${sameFailureAttempts} times in a row (or once, when its restart policy tries no more): waiting longer would not help.
A rolling update takes down at most as many slots as the service's disruption budget allows
(disruption.maxUnavailable, by default its update's parallelism), counting the slots already
unavailable for any reason (a node down, a drain, a task starting); while the budget holds it
back, the progress says so, naming the budget and the slots unavailable. --force lets the
updates this apply starts (or the ones under way) go past the budget; the service records it.
The vocabulary is in docs/resources.md; an example is docs/examples/web.yaml.

Options:
  -f, --file FILE        the spec file ('-' for standard input)
  --dry-run              show what would change (and which tasks a rolling update would replace);
                         change nothing
  --prune                remove the services an apply of this source created that the file no
                         longer names (never one made by hand or by another file)
  --source NAME          the source name new services record (default: the file's name without
                         its extension; required with -f -)
  --force                the rolling updates may go past the services' disruption budgets
                         (recorded on each service, and as an event)
  --resolve-image MODE   pin each image tag to the digest its registry names now, written into the
                         spec as name:tag@sha256:... so every task of a spec version runs one build:
                         always, changed (default: only images whose tag changed; an unchanged one
                         keeps its pin) or never. A registry that does not answer keeps the tag,
                         with a warning; the apply goes on (docs/docker.md, "Pinned digests")
  --detach               do not wait for the services to converge
  --timeout DURATION     how long to wait for convergence (default ${waitTimeoutDefault})
${commonFlagsText(23)}

With --json prints {dryRun, rev, services: [{name, outcome, change?, replaces?, fields?, specVersion}]}
and, after waiting, converged: the services' views.
Exit codes: 0 applied (and converged, unless --detach or --dry-run); 1 the specs were refused (each
problem is printed), or a service did not converge (not_converged: its update paused or rolled
back, or the timeout passed; disruption_budget: the timeout passed while its update waited for
its disruption budget; tasks_failing: every task failed the same way: what was applied stays
applied); 2 usage error (a file that cannot be read); 3 no node answered, or the cluster
cannot serve right now.`;

function readSpecFile(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read ${file === '-' ? 'standard input' : file}: ${(err as Error).message}`);
  }
}

/** `web: updated (replaces 3 tasks: image, env)` */
export function outcomeLine(o: ApplyOutcome, dryRun: boolean): string {
  const verb = dryRun ? { created: 'would be created', updated: 'would be updated', unchanged: 'unchanged', removed: 'would be removed (--prune)' }[o.outcome] : o.outcome;
  const forced = o.forced === true ? `; its rolling update ${dryRun ? 'would' : 'may'} go past the disruption budget (--force)` : '';
  if (o.outcome !== 'updated') return `${o.name}: ${verb}${forced}`;
  const fields = o.fields !== undefined && o.fields.length > 0 ? o.fields.join(', ') : 'spec';
  if (o.change === 'replace') {
    const n = o.replaces?.length ?? 0;
    const ids = dryRun && n > 0 ? ` (${o.replaces?.join(', ')})` : '';
    return `${o.name}: ${verb}: ${fields} changed; a rolling update ${dryRun ? 'would replace' : 'replaces'} ${n} task${n === 1 ? '' : 's'}${ids} (spec version ${o.specVersion})${forced}`;
  }
  return `${o.name}: ${verb}: ${fields} changed; running tasks are kept${forced}`;
}

export async function applyCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, file: { type: 'string', short: 'f' }, 'dry-run': { type: 'boolean', default: false },
    detach: { type: 'boolean', default: false }, timeout: { type: 'string' }, prune: { type: 'boolean', default: false }, source: { type: 'string' },
    force: { type: 'boolean', default: false }, 'resolve-image': { type: 'string' },
  }, applyHelp);
  if (values.help) return help(applyHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'; name the file with -f FILE`);
  if (values.file === undefined) throw new UsageError('missing -f FILE (the spec file; -f - reads standard input)');
  const timeoutMs = durationFlag(values.timeout, '--timeout', waitTimeoutDefault);
  const resolveImage = resolveImageFlag(values['resolve-image']);
  const addr = resolveAddr(values.addr);
  const source = values.source ?? (values.file === '-' ? undefined : path.basename(values.file).replace(/\.(ya?ml|json)$/, ''));
  if (values.prune && source === undefined) throw new UsageError('--prune with -f - needs --source NAME (which services it may remove)');
  const text = readSpecFile(values.file);
  const format = values.file.endsWith('.json') ? 'json' : 'yaml';
  const { body } = await request(addr, 'POST', '/v1/apply', applyAnswerSchema, {
    query: { dryRun: values['dry-run'] ? 'true' : undefined, resolveImage },
    body: { text, format, ...(source !== undefined ? { source } : {}), ...(values.prune ? { prune: true } : {}), ...(values.force ? { force: true } : {}) },
    retry: 'safe', onRetry: retryNotice('apply'),
  });
  return finish(body, { addr, json: values.json, wait: !values.detach && !values['dry-run'], timeoutMs, command: 'apply' });
}

/** --resolve-image: always, changed or never (docs/docker.md, "Pinned digests"); undefined: the node's default (changed). */
export function resolveImageFlag(v: string | undefined): 'always' | 'changed' | 'never' | undefined {
  if (v === undefined || v === 'always' || v === 'changed' || v === 'never') return v;
  throw new UsageError(`--resolve-image takes always, changed or never, not '${v}'`);
}

/** The help text of --resolve-image, for the commands that write an image; `width`: the flag column's, as commonFlagsText's. */
export function resolveImageFlagText(width: number): string {
  const pad = ' '.repeat(width + 2);
  return [
    `  ${'--resolve-image MODE'.padEnd(width)}pin each image tag to the digest its registry names now, written into the`,
    `${pad}spec as name:tag@sha256:... so every task of a spec version runs one build:`,
    `${pad}always, changed (default: only images whose tag changed; an unchanged one`,
    `${pad}keeps its pin) or never. A registry that does not answer keeps the tag,`,
    `${pad}with a warning (docs/docker.md, "Pinned digests")`,
  ].join('\n');
}

/** Prints the outcomes, then waits for the services to converge (unless told not to). */
export async function finish(answer: ApplyAnswer, o: { addr: string; json: boolean; wait: boolean; timeoutMs: number; command: string }): Promise<number> {
  if (!o.json) {
    for (const s of answer.services) console.log(outcomeLine(s, answer.dryRun));
    // Networks, firewall policies and jobs (kind Network, FirewallPolicy, Job): one line each, nothing to wait for.
    for (const [kind, list] of [['network', answer.networks], ['firewall policy', answer.firewallPolicies], ['job', answer.jobs]] as const) {
      for (const r of list ?? []) console.log(`${kind} ${r.name}: ${answer.dryRun && r.outcome !== 'unchanged' ? `would be ${r.outcome}` : r.outcome}`);
    }
    for (const i of answer.images ?? []) {
      const line = pinnedLine(i);
      if (line !== null) console.log(line);
    }
    for (const w of answer.warnings ?? []) console.error(`warning: ${w}`);
    if (answer.dryRun) console.log('dry run: nothing was changed');
  }
  if (!o.wait) {
    if (o.json) console.log(JSON.stringify(answer, null, 2));
    return exitCodes.ok;
  }
  if (!o.json) console.error('waiting for the services to converge (--detach to return at once)');
  const views = await waitConverged(answer.services.filter((s) => s.outcome !== 'removed').map((s) => ({ name: s.name, specVersion: s.specVersion })), {
    addr: o.addr, command: o.command, json: o.json, timeoutMs: o.timeoutMs,
  });
  if (o.json) console.log(JSON.stringify({ ...answer, converged: views }, null, 2));
  else for (const v of views) console.log(`${v.name}: converged, ${v.status.running}/${v.status.desired} running`);
  return exitCodes.ok;
}
