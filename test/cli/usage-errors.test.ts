// Every command and subcommand, given a bad flag or missing an argument, with --json: exit 2 and
// one documented JSON object on stderr ({error: {code: 'usage', message, usage, hint}, exitCode}),
// nothing on stdout, nothing sent anywhere (no cluster runs for these). The table must name every
// command, so a new one cannot ship without being checked here.

import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseArgsMessage } from '../../src/cli/args.ts';
import { clusterGroup } from '../../src/cli/cluster.ts';
import { devSubcommands } from '../../src/cli/dev.ts';
import { docGroup } from '../../src/cli/doc.ts';
import { vipGroup } from '../../src/cli/vip.ts';
import { volumeGroup } from '../../src/cli/volume.ts';
import { commands } from '../../src/cli/main.ts';
import { snapshotGroup } from '../../src/cli/snapshot.ts';
import { nodeGroup } from '../../src/cli/node.ts';
import { serviceGroup } from '../../src/cli/service.ts';
import { taskGroup } from '../../src/cli/task.ts';
import { jobGroup } from '../../src/cli/job.ts';
import { tokenGroup } from '../../src/cli/token.ts';
import { credentialGroup } from '../../src/cli/credential.ts';
import { certGroup } from '../../src/cli/cert.ts';
import { caGroup } from '../../src/cli/ca.ts';
import { secretGroup } from '../../src/cli/secret.ts';
import { networkGroup } from '../../src/cli/network.ts';
import { policyGroup } from '../../src/cli/policy.ts';
import { stackGroup } from '../../src/cli/stack.ts';
import { drillGroup } from '../../src/cli/drill.ts';
import { auditGroup } from '../../src/cli/audit.ts';
import { contextGroup } from '../../src/cli/context.ts';
import { registryGroup } from '../../src/cli/registry.ts';
import { backupGroup, backupTargetGroup } from '../../src/cli/backup.ts';
import { inProcess } from './in-process.ts';

interface Case {
  /** A command line with a flag the command does not have. */
  badFlag: string[];
  /** A command line missing a required argument (or, where nothing is required, with one too many). */
  missing: string[];
}

// An address nothing listens on: reaching it would fail with exit 3, not 2.
const nowhere = ['--addr', '127.0.0.1:9'];

const cases: Record<string, Case> = {
  init: { badFlag: ['init', '--data', 'd', '--name', 'n', '--bogus'], missing: ['init', '--name', 'n1'] },
  serve: { badFlag: ['serve', '--config', 'x.yaml', '--bogus'], missing: ['serve'] },
  dev: { badFlag: ['dev', '--bogus'], missing: ['dev', '--nodes'] },
  'dev restart': { badFlag: ['dev', 'restart', 'n1', '--bogus'], missing: ['dev', 'restart'] },
  'dev stop': { badFlag: ['dev', 'stop', '--bogus'], missing: ['dev', 'stop', 'extra'] },
  'dev demo-image': { badFlag: ['dev', 'demo-image', '--bogus'], missing: ['dev', 'demo-image', 'extra'] },
  status: { badFlag: ['status', '--bogus', ...nowhere], missing: ['status', 'extra', ...nowhere] },
  version: { badFlag: ['version', '--bogus'], missing: ['version', 'extra'] },
  install: { badFlag: ['install', '--data', 'd', '--bogus'], missing: ['install', '--root', 'r'] },
  uninstall: { badFlag: ['uninstall', '--data', 'd', '--bogus'], missing: ['uninstall'] },
  doc: { badFlag: ['doc', '--bogus'], missing: ['doc'] },
  'doc get': { badFlag: ['doc', 'get', 'notes', 'a', '--bogus', ...nowhere], missing: ['doc', 'get', 'notes', ...nowhere] },
  'doc put': { badFlag: ['doc', 'put', 'notes', 'a', '--data', '{}', '--bogus', ...nowhere], missing: ['doc', 'put', 'notes', 'a', ...nowhere] },
  'doc rm': { badFlag: ['doc', 'rm', 'notes', 'a', '--bogus', ...nowhere], missing: ['doc', 'rm', 'notes', ...nowhere] },
  'doc ls': { badFlag: ['doc', 'ls', 'notes', '--bogus', ...nowhere], missing: ['doc', 'ls', ...nowhere] },
  'doc watch': { badFlag: ['doc', 'watch', '--bogus', ...nowhere], missing: ['doc', 'watch', '--after', ...nowhere] },
  cluster: { badFlag: ['cluster', '--bogus'], missing: ['cluster'] },
  'cluster status': { badFlag: ['cluster', 'status', '--bogus', ...nowhere], missing: ['cluster', 'status', 'extra', ...nowhere] },
  'cluster members': { badFlag: ['cluster', 'members', '--bogus', ...nowhere], missing: ['cluster', 'members', 'extra', ...nowhere] },
  'cluster add': { badFlag: ['cluster', 'add', '--bogus', ...nowhere], missing: ['cluster', 'add', '--id', 'x', ...nowhere] },
  'cluster promote': { badFlag: ['cluster', 'promote', 'n2', '--bogus', ...nowhere], missing: ['cluster', 'promote', ...nowhere] },
  'cluster remove': { badFlag: ['cluster', 'remove', 'n2', '--bogus', ...nowhere], missing: ['cluster', 'remove', ...nowhere] },
  'cluster transfer-leader': { badFlag: ['cluster', 'transfer-leader', '--bogus', ...nowhere], missing: ['cluster', 'transfer-leader', '--to', ...nowhere] },
  events: { badFlag: ['events', '--bogus', ...nowhere], missing: ['events', 'extra', ...nowhere] },
  snapshot: { badFlag: ['snapshot', '--bogus'], missing: ['snapshot'] },
  'snapshot save': { badFlag: ['snapshot', 'save', 'f.snap', '--bogus', ...nowhere], missing: ['snapshot', 'save', ...nowhere] },
  'snapshot restore': { badFlag: ['snapshot', 'restore', 'f.snap', '--bogus'], missing: ['snapshot', 'restore', 'f.snap', '--name', 'r1'] },
  'snapshot ls': { badFlag: ['snapshot', 'ls', '--dir', 'd', '--bogus'], missing: ['snapshot', 'ls'] },
  'snapshot inspect': { badFlag: ['snapshot', 'inspect', 'f.snap', '--bogus'], missing: ['snapshot', 'inspect'] },
  recover: { badFlag: ['recover', '--force-new-cluster', '--data', 'd', '--bogus'], missing: ['recover', '--force-new-cluster'] },
  doctor: { badFlag: ['doctor', '--bogus', ...nowhere], missing: ['doctor', '--data', ...nowhere] },
  upgrade: { badFlag: ['upgrade', '--to', 'x.tgz', '--bogus', ...nowhere], missing: ['upgrade', ...nowhere] },
  drill: { badFlag: ['drill', '--bogus'], missing: ['drill'] },
  'drill leader-kill': { badFlag: ['drill', 'leader-kill', '--bogus', ...nowhere], missing: ['drill', 'leader-kill', '--target', ...nowhere] },
  'drill leader-isolate': { badFlag: ['drill', 'leader-isolate', '--bogus', ...nowhere], missing: ['drill', 'leader-isolate', '--duration', ...nowhere] },
  'drill leader-pause': { badFlag: ['drill', 'leader-pause', '--bogus', ...nowhere], missing: ['drill', 'leader-pause', '--duration', ...nowhere] },
  'drill follower-pause': { badFlag: ['drill', 'follower-pause', '--bogus', ...nowhere], missing: ['drill', 'follower-pause', '--duration', ...nowhere] },
  'drill node-reboot': { badFlag: ['drill', 'node-reboot', '--bogus', ...nowhere], missing: ['drill', 'node-reboot', '--duration', ...nowhere] },
  'drill disk-stall': { badFlag: ['drill', 'disk-stall', '--bogus', ...nowhere], missing: ['drill', 'disk-stall', '--recover-timeout', ...nowhere] },
  'drill ls': { badFlag: ['drill', 'ls', '--bogus', ...nowhere], missing: ['drill', 'ls', '--limit', ...nowhere] },
  'drill schedule': { badFlag: ['drill', 'schedule', 'leader-kill', '--every', '24h', '--bogus', ...nowhere], missing: ['drill', 'schedule', '--every', '24h', ...nowhere] },
  apply: { badFlag: ['apply', '-f', 'web.yaml', '--bogus', ...nowhere], missing: ['apply', ...nowhere] },
  service: { badFlag: ['service', '--bogus'], missing: ['service'] },
  'service ls': { badFlag: ['service', 'ls', '--bogus', ...nowhere], missing: ['service', 'ls', 'extra', ...nowhere] },
  'service ps': { badFlag: ['service', 'ps', 'web', '--bogus', ...nowhere], missing: ['service', 'ps', ...nowhere] },
  'service inspect': { badFlag: ['service', 'inspect', 'web', '--bogus', ...nowhere], missing: ['service', 'inspect', ...nowhere] },
  'service rm': { badFlag: ['service', 'rm', 'web', '--bogus', ...nowhere], missing: ['service', 'rm', ...nowhere] },
  'service scale': { badFlag: ['service', 'scale', 'web', '3', '--bogus', ...nowhere], missing: ['service', 'scale', 'web', ...nowhere] },
  'service update': { badFlag: ['service', 'update', 'web', '--image', 'x', '--bogus', ...nowhere], missing: ['service', 'update', 'web', ...nowhere] },
  'service rollback': { badFlag: ['service', 'rollback', 'web', '--bogus', ...nowhere], missing: ['service', 'rollback', ...nowhere] },
  'service rebalance': { badFlag: ['service', 'rebalance', 'web', '--bogus', ...nowhere], missing: ['service', 'rebalance', ...nowhere] },
  'service logs': { badFlag: ['service', 'logs', 'web', '--bogus', ...nowhere], missing: ['service', 'logs', ...nowhere] },
  node: { badFlag: ['node', '--bogus'], missing: ['node'] },
  'node ls': { badFlag: ['node', 'ls', '--bogus', ...nowhere], missing: ['node', 'ls', 'extra', ...nowhere] },
  'node inspect': { badFlag: ['node', 'inspect', 'n1', '--bogus', ...nowhere], missing: ['node', 'inspect', ...nowhere] },
  'node drain': { badFlag: ['node', 'drain', 'n1', '--bogus', ...nowhere], missing: ['node', 'drain', ...nowhere] },
  'node pause': { badFlag: ['node', 'pause', 'n1', '--bogus', ...nowhere], missing: ['node', 'pause', ...nowhere] },
  'node activate': { badFlag: ['node', 'activate', 'n1', '--bogus', ...nowhere], missing: ['node', 'activate', ...nowhere] },
  'node label': { badFlag: ['node', 'label', 'n1', 'a=b', '--bogus', ...nowhere], missing: ['node', 'label', 'n1', ...nowhere] },
  'node rm': { badFlag: ['node', 'rm', 'n1', '--bogus', ...nowhere], missing: ['node', 'rm', ...nowhere] },
  'node rotate-key': { badFlag: ['node', 'rotate-key', 'n1', '--bogus', ...nowhere], missing: ['node', 'rotate-key', ...nowhere] },
  task: { badFlag: ['task', '--bogus'], missing: ['task'] },
  'task ls': { badFlag: ['task', 'ls', '--bogus', ...nowhere], missing: ['task', 'ls', 'extra', ...nowhere] },
  join: { badFlag: ['join', '127.0.0.1:9', '--token', 'x', '--bogus'], missing: ['join', '--token', 'x'] },
  login: { badFlag: ['login', '127.0.0.1:9', '--token', 'x', '--bogus'], missing: ['login', '--token', 'x'] },
  token: { badFlag: ['token', '--bogus'], missing: ['token'] },
  'token create': { badFlag: ['token', 'create', '--role', 'voter', '--bogus', ...nowhere], missing: ['token', 'create', ...nowhere] },
  'token ls': { badFlag: ['token', 'ls', '--bogus', ...nowhere], missing: ['token', 'ls', 'extra', ...nowhere] },
  'token revoke': { badFlag: ['token', 'revoke', 'abc', '--bogus', ...nowhere], missing: ['token', 'revoke', ...nowhere] },
  'task logs': { badFlag: ['task', 'logs', 'abc', '--bogus', ...nowhere], missing: ['task', 'logs', ...nowhere] },
  job: { badFlag: ['job', '--bogus'], missing: ['job'] },
  'job ls': { badFlag: ['job', 'ls', '--bogus', ...nowhere], missing: ['job', 'ls', 'extra', ...nowhere] },
  'job ps': { badFlag: ['job', 'ps', 'j', '--bogus', ...nowhere], missing: ['job', 'ps', ...nowhere] },
  'job logs': { badFlag: ['job', 'logs', 'j', '--bogus', ...nowhere], missing: ['job', 'logs', ...nowhere] },
  'job run': { badFlag: ['job', 'run', 'j', '--bogus', ...nowhere], missing: ['job', 'run', ...nowhere] },
  'job suspend': { badFlag: ['job', 'suspend', 'j', '--bogus', ...nowhere], missing: ['job', 'suspend', ...nowhere] },
  'job resume': { badFlag: ['job', 'resume', 'j', '--bogus', ...nowhere], missing: ['job', 'resume', ...nowhere] },
  'job rm': { badFlag: ['job', 'rm', 'j', '--bogus', ...nowhere], missing: ['job', 'rm', ...nowhere] },
  credential: { badFlag: ['credential', '--bogus'], missing: ['credential'] },
  'credential create': { badFlag: ['credential', 'create', '--principal', 'p', '--role', 'reader', '--bogus', ...nowhere], missing: ['credential', 'create', '--role', 'reader', ...nowhere] },
  'credential ls': { badFlag: ['credential', 'ls', '--bogus', ...nowhere], missing: ['credential', 'ls', 'extra', ...nowhere] },
  'credential revoke': { badFlag: ['credential', 'revoke', '0123456789abcdef', '--bogus', ...nowhere], missing: ['credential', 'revoke', ...nowhere] },
  secret: { badFlag: ['secret', '--bogus'], missing: ['secret'] },
  'secret create': { badFlag: ['secret', 'create', 'db', '--from-stdin', '--bogus', ...nowhere], missing: ['secret', 'create', 'db', ...nowhere] },
  'secret set': { badFlag: ['secret', 'set', 'db', '--from-file', 'f', '--bogus', ...nowhere], missing: ['secret', 'set', '--from-stdin', ...nowhere] },
  'secret ls': { badFlag: ['secret', 'ls', '--bogus', ...nowhere], missing: ['secret', 'ls', 'extra', ...nowhere] },
  'secret inspect': { badFlag: ['secret', 'inspect', 'db', '--bogus', ...nowhere], missing: ['secret', 'inspect', ...nowhere] },
  'secret rm': { badFlag: ['secret', 'rm', 'db', '--bogus', ...nowhere], missing: ['secret', 'rm', ...nowhere] },
  'secret keyring': { badFlag: ['secret', 'keyring', '--bogus', ...nowhere], missing: ['secret', 'keyring', 'extra', ...nowhere] },
  'secret rotate-key': { badFlag: ['secret', 'rotate-key', '--bogus', ...nowhere], missing: ['secret', 'rotate-key', 'extra', ...nowhere] },
  'secret recovery-key': { badFlag: ['secret', 'recovery-key', '--bogus', ...nowhere], missing: ['secret', 'recovery-key', 'extra', ...nowhere] },
  'cluster autolock': { badFlag: ['cluster', 'autolock', 'status', '--bogus', ...nowhere], missing: ['cluster', 'autolock', ...nowhere] },
  unlock: { badFlag: ['unlock', '--bogus', ...nowhere], missing: ['unlock', 'extra', ...nowhere] },
  network: { badFlag: ['network', '--bogus'], missing: ['network'] },
  'network ls': { badFlag: ['network', 'ls', '--bogus', ...nowhere], missing: ['network', 'ls', 'extra', ...nowhere] },
  'network inspect': { badFlag: ['network', 'inspect', 'front', '--bogus', ...nowhere], missing: ['network', 'inspect', ...nowhere] },
  'network rm': { badFlag: ['network', 'rm', 'front', '--bogus', ...nowhere], missing: ['network', 'rm', ...nowhere] },
  policy: { badFlag: ['policy', '--bogus'], missing: ['policy'] },
  'policy ls': { badFlag: ['policy', 'ls', '--bogus', ...nowhere], missing: ['policy', 'ls', 'extra', ...nowhere] },
  'policy inspect': { badFlag: ['policy', 'inspect', 'web-db', '--bogus', ...nowhere], missing: ['policy', 'inspect', ...nowhere] },
  'policy rm': { badFlag: ['policy', 'rm', 'web-db', '--bogus', ...nowhere], missing: ['policy', 'rm', ...nowhere] },
  stack: { badFlag: ['stack', '--bogus'], missing: ['stack'] },
  'stack deploy': { badFlag: ['stack', 'deploy', '-c', 'compose.yaml', 'app', '--bogus', ...nowhere], missing: ['stack', 'deploy', ...nowhere] },
  'stack config': { badFlag: ['stack', 'config', '--bogus'], missing: ['stack', 'config'] },
  'stack ls': { badFlag: ['stack', 'ls', '--bogus', ...nowhere], missing: ['stack', 'ls', 'extra', ...nowhere] },
  'stack ps': { badFlag: ['stack', 'ps', 'app', '--bogus', ...nowhere], missing: ['stack', 'ps', ...nowhere] },
  'stack services': { badFlag: ['stack', 'services', 'app', '--bogus', ...nowhere], missing: ['stack', 'services', ...nowhere] },
  'stack rm': { badFlag: ['stack', 'rm', 'app', '--bogus', ...nowhere], missing: ['stack', 'rm', ...nowhere] },
  audit: { badFlag: ['audit', '--bogus'], missing: ['audit'] },
  'audit ls': { badFlag: ['audit', 'ls', '--bogus', ...nowhere], missing: ['audit', 'ls', 'extra', ...nowhere] },
  cert: { badFlag: ['cert', '--bogus'], missing: ['cert'] },
  'cert revoke': { badFlag: ['cert', 'revoke', '0a1b', '--bogus', ...nowhere], missing: ['cert', 'revoke', ...nowhere] },
  'cert revoked': { badFlag: ['cert', 'revoked', '--bogus', ...nowhere], missing: ['cert', 'revoked', 'extra', ...nowhere] },
  'cert renew': { badFlag: ['cert', 'renew', '--bogus', ...nowhere], missing: ['cert', 'renew'] },
  ca: { badFlag: ['ca', '--bogus'], missing: ['ca'] },
  'ca rotate': { badFlag: ['ca', 'rotate', '--bogus', ...nowhere], missing: ['ca', 'rotate', 'extra', ...nowhere] },
  context: { badFlag: ['context', '--bogus'], missing: ['context'] },
  'context ls': { badFlag: ['context', 'ls', '--bogus'], missing: ['context', 'ls', 'extra'] },
  'context use': { badFlag: ['context', 'use', 'x', '--bogus'], missing: ['context', 'use'] },
  'context rm': { badFlag: ['context', 'rm', 'x', '--bogus'], missing: ['context', 'rm'] },
  'context show': { badFlag: ['context', 'show', '--bogus'], missing: ['context', 'show', 'extra'] },
  // Registry logins (issue 40).
  registry: { badFlag: ['registry', '--bogus'], missing: ['registry'] },
  'registry login': { badFlag: ['registry', 'login', 'ghcr.io', '--password-stdin', '--bogus', ...nowhere], missing: ['registry', 'login', '--password-stdin', ...nowhere] },
  'registry logout': { badFlag: ['registry', 'logout', 'ghcr.io', '--bogus', ...nowhere], missing: ['registry', 'logout', ...nowhere] },
  'registry ls': { badFlag: ['registry', 'ls', '--bogus', ...nowhere], missing: ['registry', 'ls', 'extra', ...nowhere] },
  // Backups (issue 43).
  backup: { badFlag: ['backup', '--bogus'], missing: ['backup'] },
  'backup target': { badFlag: ['backup', 'target', '--bogus'], missing: ['backup', 'target'] },
  'backup target add': { badFlag: ['backup', 'target', 'add', 'nas', '--dir', '/mnt/nas', '--bogus', ...nowhere], missing: ['backup', 'target', 'add', ...nowhere] },
  'backup target ls': { badFlag: ['backup', 'target', 'ls', '--bogus', ...nowhere], missing: ['backup', 'target', 'ls', 'extra', ...nowhere] },
  'backup target rm': { badFlag: ['backup', 'target', 'rm', 'nas', '--bogus', ...nowhere], missing: ['backup', 'target', 'rm', ...nowhere] },
  'backup now': { badFlag: ['backup', 'now', '--bogus', ...nowhere], missing: ['backup', 'now', 'extra', ...nowhere] },
  'backup ls': { badFlag: ['backup', 'ls', '--bogus', ...nowhere], missing: ['backup', 'ls', 'extra', ...nowhere] },
  'backup verify': { badFlag: ['backup', 'verify', '20261206T140000Z-000000000001', '--bogus', ...nowhere], missing: ['backup', 'verify', ...nowhere] },
  restore: { badFlag: ['restore', '--from', '/mnt/nas', '--bogus'], missing: ['restore', '--from', '/mnt/nas'] },
  'drill restore': { badFlag: ['drill', 'restore', '--from', '/mnt/nas', '--bogus'], missing: ['drill', 'restore', '--from', '/mnt/nas'] },
  // Virtual IPs (issue 38).
  vip: { badFlag: ['vip', '--bogus'], missing: ['vip'] },
  'vip ls': { badFlag: ['vip', 'ls', '--bogus', ...nowhere], missing: ['vip', 'ls', 'extra', ...nowhere] },
  // Replicated volumes (issue 41).
  volume: { badFlag: ['volume', '--bogus'], missing: ['volume'] },
  'volume ls': { badFlag: ['volume', 'ls', '--bogus', ...nowhere], missing: ['volume', 'ls', 'extra', ...nowhere] },
  'volume inspect': { badFlag: ['volume', 'inspect', 'pgdata', '--bogus', ...nowhere], missing: ['volume', 'inspect', ...nowhere] },
  'volume restore': { badFlag: ['volume', 'restore', 'pgdata', '--empty', '--bogus', ...nowhere], missing: ['volume', 'restore', 'pgdata', ...nowhere] },
  'volume rm-copy': { badFlag: ['volume', 'rm-copy', 'pgdata', '--node', 'n1', '--version', 's4-e0-n1', '--bogus', ...nowhere], missing: ['volume', 'rm-copy', 'pgdata', '--node', 'n1', ...nowhere] },
};


function expectUsageJson(r: { code: number; stdout: string; stderr: string }, what: string): { message: string; usage: string } {
  expect(r.code, `${what}: ${r.stderr}`).toBe(2);
  expect(r.stdout, what).toBe('');
  const lines = r.stderr.trim().split('\n');
  expect(lines, what).toHaveLength(1);
  const body = JSON.parse(lines[0] ?? '') as { error: { code: string; message: string; usage: string; hint: string }; exitCode: number };
  expect(body, what).toEqual({ error: { code: 'usage', message: expect.any(String), usage: expect.stringMatching(/^Usage: shoal /), hint: expect.stringContaining('--help') }, exitCode: 2 });
  return body.error;
}

describe('usage errors under --json', () => {
  it('the table covers every command and subcommand', () => {
    const all = [
      ...Object.keys(commands),
      ...devSubcommands.map((s) => `dev ${s}`),
      ...[docGroup, clusterGroup, snapshotGroup, serviceGroup, nodeGroup, taskGroup, credentialGroup, tokenGroup, secretGroup, networkGroup, policyGroup, drillGroup, auditGroup, certGroup, caGroup, contextGroup, stackGroup, jobGroup].flatMap((g) => Object.keys(g.subcommands).map((s) => `${g.name} ${s}`)),
      ...Object.keys(registryGroup.subcommands).map((s) => `registry ${s}`),
      ...Object.keys(backupGroup.subcommands).map((s) => `backup ${s}`),
      ...Object.keys(backupTargetGroup.subcommands).map((s) => `backup target ${s}`),
      ...Object.keys(vipGroup.subcommands).map((s) => `vip ${s}`),
      ...Object.keys(volumeGroup.subcommands).map((s) => `volume ${s}`),
    ];
    expect(Object.keys(cases).sort()).toEqual(all.sort());
  });

  for (const [command, c] of Object.entries(cases)) {
    it(`shoal ${command}: a bad flag and a missing argument exit 2 with one JSON object on stderr`, async () => {
      const bad = expectUsageJson(await inProcess(...[...c.badFlag, '--json']), `${command} (bad flag)`);
      expect(bad.message).toMatch(/^unknown option --bogus|expected a subcommand before --bogus/);
      expectUsageJson(await inProcess(...[...c.missing, '--json']), `${command} (missing argument)`);
    });
  }

  it('says an unknown flag our way, then the usage line, without --json', async () => {
    const r = await inProcess(...['doc', 'get', 'notes', 'a', '--stael']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe([
      'shoal doc get: unknown option --stael (did you mean --stale?)',
      'Usage: shoal doc get COLLECTION ID [--stale] [--addr HOST:PORT] [--json]',
      "Run 'shoal doc get --help' for the options.",
      '',
    ].join('\n'));
    expect(r.stderr).not.toContain("place it at the end of the command after '--'");
  });

  it('rewords every parseArgs failure', () => {
    const e = (code: string, message: string): Error & { code: string } => Object.assign(new Error(message), { code });
    expect(parseArgsMessage(e('ERR_PARSE_ARGS_UNKNOWN_OPTION', "Unknown option '--foo'. To specify a positional argument starting with a '-', place it at the end of the command after '--', as in '-- \"--foo\""), ['addr'])).toBe('unknown option --foo');
    expect(parseArgsMessage(e('ERR_PARSE_ARGS_INVALID_OPTION_VALUE', "Option '--addr <value>' argument missing"), ['addr'])).toBe('option --addr needs a value');
    expect(parseArgsMessage(e('ERR_PARSE_ARGS_INVALID_OPTION_VALUE', "Option '--json' does not take an argument"), ['json'])).toBe('option --json takes no value');
    expect(parseArgsMessage(e('ERR_PARSE_ARGS_INVALID_OPTION_VALUE', "Option '--addr' argument is ambiguous.\nDid you forget"), ['addr'])).toMatch(/^option --addr needs a value; .*--addr=VALUE/);
  });

  it('names the rule and the field of a bad number, a negative one included (service scale web -3)', async () => {
    const said = async (...argv: string[]): Promise<string> => expectUsageJson(await inProcess(...argv, ...nowhere, '--json'), argv.join(' ')).message;
    expect(await said('service', 'scale', 'web', '-3')).toBe("replicas must be at least 0, got '-3'");
    expect(await said('service', 'scale', 'web=-3')).toBe("replicas must be at least 0, got '-3'");
    expect(await said('service', 'scale', 'web', '1.5')).toBe("replicas must be a whole number, got '1.5'");
    expect(await said('service', 'scale', 'web', '20000')).toBe("replicas must be at most 10000, got '20000'");
    expect(await said('service', 'scale', 'web', 'three')).toBe("replicas must be a whole number from 0 to 10000, got 'three'");
    expect(await said('service', 'update', 'web', '--replicas', '-3')).toBe("--replicas must be at least 0, got '-3'");
    expect(await said('service', 'update', 'web', '--replicas=-1')).toBe("--replicas must be at least 0, got '-1'");
    expect(await said('service', 'scale', 'web', '3', '--timeout', '-5s')).toBe("--timeout must be a duration of 0 or more (such as 90s or 5m), got '-5s'");
    expect(await said('service', 'logs', 'web', '--tail', '-1')).toBe("--tail must be at least 0, got '-1'");
  });

  it('unknown commands and a missing command are usage errors too, in JSON under --json', async () => {
    const unknown = expectUsageJson(await inProcess(...['frobnicate', '--json']), 'unknown command');
    expect(unknown.message).toBe("unknown command 'frobnicate'");
    expect(unknown.usage).toContain('Commands: init, serve, dev');
    expect(expectUsageJson(await inProcess(...['--json']), 'no command').message).toBe('missing command');
    expect(expectUsageJson(await inProcess(...['doc', 'frobnicate', '--json']), 'unknown subcommand').message).toBe("unknown subcommand 'frobnicate'");
  });

  it('suggests the nearest command and subcommand, as it does options, and nothing for a word far from all', async () => {
    expect(expectUsageJson(await inProcess('stauts', '--json'), 'typo').message).toBe("unknown command 'stauts' (did you mean status?)");
    expect(expectUsageJson(await inProcess('servise', '--json'), 'typo').message).toBe("unknown command 'servise' (did you mean service?)");
    expect(expectUsageJson(await inProcess('doc', 'lst', '--json'), 'sub typo').message).toBe("unknown subcommand 'lst' (did you mean ls?)");
    expect(expectUsageJson(await inProcess('cluster', 'memebrs', '--json'), 'sub typo').message).toBe("unknown subcommand 'memebrs' (did you mean members?)");
    // Two letters two edits from 'rm' are not a typo of it.
    expect(expectUsageJson(await inProcess('doc', 'up', '--json'), 'far').message).toBe("unknown subcommand 'up'");
    const text = await inProcess('contxt', 'ls');
    expect(text.stderr.split('\n')[0]).toBe("shoal: unknown command 'contxt' (did you mean context?)");
  });

  it('a real process prints the JSON object alone on stderr (shoal doc get notes --json)', async () => {
    const bin = fileURLToPath(new URL('../../bin/shoal.js', import.meta.url));
    const r = await promisify(execFile)(process.execPath, [bin, 'doc', 'get', 'notes', '--json']).then(
      () => ({ code: 0, stdout: '', stderr: '' }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expectUsageJson(r, 'doc get notes --json');
  });
});
