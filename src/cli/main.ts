// The `shoal` command: dispatches to subcommands and maps failures to exit codes.

import { didYouMean, exitCodes, UsageError, wantsJson } from './args.ts';
import { reportError } from './report.ts';
import { runCliCommand, type Command } from './command.ts';

export type { Command, Run } from './command.ts';

// Commands load lazily: `shoal status` should not pay for loading the storage engine.
export const commands: Record<string, { load: () => Promise<Command>; summary: string }> = {
  init: { load: async () => { const m = await import('./init.ts'); return { run: m.initCommand, help: m.initHelp }; }, summary: "found a one-node cluster (data directory, CA, config), print the join command, run it" },
  serve: { load: async () => { const m = await import('./serve.ts'); return { run: m.serveCommand, help: m.serveHelp }; }, summary: 'run a node from a config file' },
  dev: { load: async () => { const m = await import('./dev.ts'); return { run: m.devCommand, help: m.devHelp }; }, summary: 'start a local cluster (separate processes); dev restart NODE, dev stop, dev demo-image' },
  join: { load: async () => { const m = await import('./join.ts'); return { run: m.joinCommand, help: m.joinHelp }; }, summary: 'join this machine to a cluster with a token (one command), and run the node' },
  token: { load: async () => { const m = await import('./token.ts'); return { run: m.tokenCommand, help: m.tokenGroupHelp }; }, summary: 'create, ls, revoke join tokens' },
  login: { load: async () => { const m = await import('./login.ts'); return { run: m.loginCommand, help: m.loginHelp }; }, summary: "exchange a client token for a client credential; or, on a member, --local: an admin one from the node's CA key" },
  status: { load: async () => { const m = await import('./status.ts'); return { run: (argv) => m.statusCommand(argv), help: m.statusHelp() }; }, summary: 'show leader, term, commit index and members' },
  doc: { load: async () => { const m = await import('./doc.ts'); return { run: m.docCommand, help: m.docGroupHelp }; }, summary: 'get, put, rm, ls and watch documents' },
  cluster: { load: async () => { const m = await import('./cluster.ts'); return { run: m.clusterCommand, help: m.clusterGroupHelp }; }, summary: 'members, add, promote, remove, transfer-leader, autolock' },
  apply: { load: async () => { const m = await import('./apply.ts'); return { run: m.applyCommand, help: m.applyHelp }; }, summary: 'apply Service specs from a file, and wait until they run' },
  service: { load: async () => { const m = await import('./service.ts'); return { run: m.serviceCommand, help: m.serviceGroupHelp }; }, summary: 'ls, ps, inspect, logs, rm, scale, update, rollback, rebalance services' },
  node: { load: async () => { const m = await import('./node.ts'); return { run: m.nodeCommand, help: m.nodeGroupHelp }; }, summary: 'ls, inspect, drain, pause, activate, label nodes' },
  network: { load: async () => { const m = await import('./network.ts'); return { run: m.networkCommand, help: m.networkGroupHelp }; }, summary: 'ls, inspect, rm overlay networks' },
  stack: { load: async () => { const m = await import('./stack.ts'); return { run: m.stackCommand, help: m.stackGroupHelp }; }, summary: 'deploy compose files as a stack (all or nothing); config, ls, ps, services, rm' },
  policy: { load: async () => { const m = await import('./policy.ts'); return { run: m.policyCommand, help: m.policyGroupHelp }; }, summary: 'ls, inspect, rm firewall policies' },
  task: { load: async () => { const m = await import('./task.ts'); return { run: m.taskCommand, help: m.taskGroupHelp }; }, summary: 'ls tasks; logs of a task' },
  job: { load: async () => { const m = await import('./job.ts'); return { run: m.jobCommand, help: m.jobGroupHelp }; }, summary: 'ls, ps, logs, run, suspend, resume, rm jobs (chores on a schedule)' },
  secret: { load: async () => { const m = await import('./secret.ts'); return { run: m.secretCommand, help: m.secretGroupHelp }; }, summary: 'create, set, ls, inspect, rm workload secrets (values never shown); keyring, rotate-key, recovery-key' },
  events: { load: async () => { const m = await import('./events.ts'); return { run: m.eventsCommand, help: m.eventsHelp }; }, summary: "the cluster's events (leader elected, member added, unreachable, ...); --watch to follow" },
  snapshot: { load: async () => { const m = await import('./snapshot.ts'); return { run: m.snapshotCommand, help: m.snapshotGroupHelp }; }, summary: 'save a snapshot to a file; ls, inspect; restore one into a new cluster' },
  recover: { load: async () => { const m = await import('./recover.ts'); return { run: m.recoverCommand, help: m.recoverHelp }; }, summary: 'quorum lost for good: --force-new-cluster makes a stopped survivor a one-node cluster (new cluster id)' },
  unlock: { load: async () => { const m = await import('./keyring.ts'); return { run: m.unlockCommand, help: m.unlockHelp }; }, summary: 'give a restarted, autolocked node its unlock key (shoal cluster autolock)' },
  credential: { load: async () => { const m = await import('./credential.ts'); return { run: m.credentialCommand, help: m.credentialGroupHelp }; }, summary: 'create, ls and revoke bearer tokens for the client API (admin)' },
  context: { load: async () => { const m = await import('./context.ts'); return { run: m.contextCommand, help: m.contextGroupHelp }; }, summary: "ls, use, rm, show this user's credentials, one per cluster (init, dev and login add them)" },
  cert: { load: async () => { const m = await import('./cert.ts'); return { run: m.certCommand, help: m.certGroupHelp }; }, summary: 'revoke one certificate by serial; list the revoked ones (admin)' },
  ca: { load: async () => { const m = await import('./ca.ts'); return { run: m.caCommand, help: m.caGroupHelp }; }, summary: 'replace the cluster CA with no outage (admin)' },
  audit: { load: async () => { const m = await import('./audit.ts'); return { run: m.auditCommand, help: m.auditGroupHelp }; }, summary: 'who changed what: the audit records of client mutations; --watch to follow (admin)' },
  install: { load: async () => { const m = await import('./install.ts'); return { run: m.installCommand, help: m.installHelp }; }, summary: 'run a node as a systemd service (enable and start it)' },
  uninstall: { load: async () => { const m = await import('./install.ts'); return { run: m.uninstallCommand, help: m.uninstallHelp }; }, summary: "stop and remove a node's systemd service" },
  upgrade: { load: async () => { const m = await import('./upgrade.ts'); return { run: m.upgradeCommand, help: m.upgradeHelp }; }, summary: 'rolling upgrade to an npm pack tarball, node by node, leader last (--resume, --rollback)' },
  drill: { load: async () => { const m = await import('./drill.ts'); return { run: m.drillGroupCommand, help: m.drillGroupHelp }; }, summary: 'failover drills (leader-kill, leader-isolate, leader-pause, follower-pause, node-reboot, disk-stall) with a report; ls; schedule' },
  doctor: { load: async () => { const m = await import('./doctor.ts'); return { run: m.doctorCommand, help: m.doctorHelp }; }, summary: 'check quorum, clock skew, disk free, versions, API exposure, certificates and workloads; OK/WARN/FAIL with what to do' },
  version: { load: async () => { const m = await import('./version.ts'); return { run: m.versionCommand, help: m.versionHelp }; }, summary: 'print the version of this command (also shoal --version)' },
  // Registry logins (issue 40).
  registry: { load: async () => { const m = await import('./registry.ts'); return { run: m.registryCommand, help: m.registryGroupHelp }; }, summary: 'login, logout, ls: credentials nodes send to private image registries (kept encrypted)' },
  // Backups off the cluster (issue 43).
  backup: { load: async () => { const m = await import('./backup.ts'); return { run: m.backupCommand, help: m.backupGroupHelp }; }, summary: 'target add|ls|rm, now, ls, verify: backups to a NAS directory or SFTP, on a schedule, with retention' },
  restore: { load: async () => { const m = await import('./restore.ts'); return { run: m.restoreCommand, help: m.restoreHelp }; }, summary: 'found a NEW cluster on this machine from a backup (checked, opened with the recovery key)' },
  // Virtual IPs (issue 38).
  vip: { load: async () => { const m = await import('./vip.ts'); return { run: m.vipCommand, help: m.vipGroupHelp }; }, summary: 'ls: the virtual IPs, their holders and leases' },
  // Replicated volumes (issue 41).
  volume: { load: async () => { const m = await import('./volume.ts'); return { run: m.volumeCommand, help: m.volumeGroupHelp }; }, summary: 'ls, inspect, restore: replicated volumes, their copies, and restoring one' },
};

/** The usage line and the list of commands: what a mistyped command is answered with. */
const topUsage = `Usage: shoal <command> [options]
Commands: ${Object.keys(commands).join(', ')}`;

export const mainHelp = `Usage: shoal <command> [options]

Commands:
${Object.entries(commands).map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`).join('\n')}

Options:
  --credential FILE  the credential file to use, after the command (docs/security.md)
  --context NAME     the context to use (shoal context ls); default $SHOAL_CONTEXT, else the current
                     context in $SHOAL_CONFIG, else in ~/.config/shoal. init, dev and login add
                     theirs under this name
  --version          print the version (as 'shoal version'; with --json as JSON)
  -h, --help         show this help

Run 'shoal <command> --help' for a command's options. Docs: docs/operations.md, docs/cli.md.
Under --json every failure, usage errors included, is one JSON object on stderr.`;

export async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === 'help' || first === '--help' || first === '-h') {
    console.log(mainHelp);
    return exitCodes.ok;
  }
  const name = first === '--version' || first === '-V' ? 'version' : first;
  const json = wantsJson(argv);
  if (name === undefined || (name.startsWith('-') && commands[name] === undefined)) {
    const err = new UsageError(name === undefined || name === '--json' ? 'missing command' : `unknown option ${name} (options go after the command)`, topUsage);
    return reportError('', err, json);
  }
  const command = commands[name];
  if (command === undefined) {
    return reportError('', new UsageError(`unknown command '${name}'${didYouMean(name, Object.keys(commands))}`, topUsage), json);
  }
  return runCliCommand(name, rest, json, command.load);
}
