// shoal upgrade: a rolling upgrade of the whole cluster to an `npm pack` tarball, node by node
// over the nodes' own authenticated API (no SSH), or a rollback to each node's previous release
// (docs/operations.md, "Rolling upgrade"; the walk: upgrade-walk.ts).

import { existsSync } from 'node:fs';
import path from 'node:path';
import { exitCodes, parse, UsageError } from './args.ts';
import { resolveAddr } from './client.ts';
import { byName } from './cluster-view.ts';
import { durationFlag } from './control-args.ts';
import { commonFlags } from './doc-common.ts';
import { commonFlagsHelp } from './group.ts';
import { printer, terminalPrinter } from './upgrade-output.ts';
import { walkUpgrade } from './upgrade-walk.ts';

export const upgradeHelp = `Usage: shoal upgrade --to TARBALL [--resume] [--timeout D] [--addr HOST:PORT] [--json]
       shoal upgrade --rollback [--timeout D] [--addr HOST:PORT] [--json]

Upgrades every node of the cluster to the build TARBALL (made by 'npm pack' in a checkout),
one node at a time, without SSH: the build goes to each node over its own API (admin role),
checksum-verified; once every node has taken it, the followers (by name), then the leader:
check the cluster can lose one voter, activate the build (releases/current; a leader hands
leadership over first), the node stops gracefully and its service manager starts the new build
(exit code 10); wait until it runs the build, has caught up and is healthy; next. The cluster
feature level is raised by the leader once every node runs the new build; the end shows it.
Each node must run from its releases folder (<data>/releases/current; 'shoal install' sets it
up). docs/operations.md, "Rolling upgrade".

The first problem stops the walk, saying what was done and what to run next. Nothing was
restarted if the build is refused by any node (checksum, not a shoal package, does not start).

Options:
  --to TARBALL   the build to upgrade to (shoal-<version>.tgz)
  --resume       go on after a walk that stopped: nodes that already run the build are skipped
                 (without it, a cluster where some do is refused)
  --rollback     back to each node's previous release (releases/previous), followers first;
                 nodes already back (their previous is newer than what they run) are skipped,
                 so it can be run again after it stopped; refused before any node is touched
                 when a previous release cannot apply the cluster's feature level (raised once
                 every node ran the newer build; it never goes down)
  --timeout D    how long one node may take to come back (default 2m; units ms, s, m, h)
${commonFlagsHelp}

On a terminal each node has one progress line, rewritten as it goes; otherwise a line per step.
With --json, one JSON object per line: {"event":"plan",...}, {"event":"step","node","step",
"message",...} per step (sending, sent, activating, waiting, back, skipped), {"event":"done",
"featureLevel","versions"}; a failure is one JSON object on stderr.
Exit codes: 0 every node runs the build (or the previous one, with --rollback); 1 the walk
stopped at a problem (the message says where, what was done and what to run next), or a
refusal; 2 usage error; 3 no node answered, or the cluster had no leader.`;

export async function upgradeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, to: { type: 'string' }, resume: { type: 'boolean', default: false }, rollback: { type: 'boolean', default: false }, timeout: { type: 'string' },
  }, upgradeHelp);
  if (values.help) {
    console.log(upgradeHelp);
    return exitCodes.ok;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.to === undefined && !values.rollback) throw new UsageError('give --to TARBALL (the build to upgrade to), or --rollback');
  if (values.to !== undefined && values.rollback) throw new UsageError('--to and --rollback go separately: --rollback goes back to each node\'s previous release');
  if (values.rollback && values.resume) throw new UsageError('--resume goes with --to; a --rollback run again skips the nodes already back by itself');
  if (values.to !== undefined && !existsSync(values.to)) throw new UsageError(`--to ${values.to}: no such file`);
  const nodeTimeoutMs = durationFlag(values.timeout, '--timeout', '2m');
  const addr = resolveAddr(values.addr);
  const tty = !values.json && process.stdout.isTTY;
  const emit = tty ? terminalPrinter() : printer(values.json);
  const view = await walkUpgrade({
    addr, rollback: values.rollback, resume: values.resume, nodeTimeoutMs, emit,
    ...(values.to !== undefined ? { tarball: path.resolve(values.to) } : {}),
  }).catch((err: unknown) => {
    // A progress line left open would take the failure's first words.
    if (tty) process.stdout.write('\n');
    throw err;
  });
  const versions = Object.fromEntries(byName(view.members).map((m) => [m.name, m.softwareVersion]));
  const level = view.featureLevel ?? null;
  emit({
    event: 'done', featureLevel: level, versions,
    message: `done: ${Object.entries(versions).map(([n, v]) => `${n} ${v ?? '?'}`).join(', ')}; cluster feature level ${level ?? 'unknown'}`,
  });
  return exitCodes.ok;
}
