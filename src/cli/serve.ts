// shoal serve: runs one node from a config file until SIGINT/SIGTERM, then stops gracefully
// (a leader hands leadership away first).

import { loadConfig } from '../server/config.ts';
import { hostPortProblem } from '../base/host-port.ts';
import { waitOutDrillHold } from '../node/drill/drill-hold.ts';
import { performance } from 'node:perf_hooks';
import { startUpLine } from '../server/lifecycle.ts';
import { startNode, type RunningNode } from '../server/server.ts';
import { exitCodeOfError, exitCodes, parse, UsageError } from './args.ts';
import { allocatorInUse, allocatorLine } from './node-environment.ts';
import type { ShoalError } from '../errors.ts';
import { serveLogger } from './logger.ts';

/**
 * Set by `shoal dev` for its nodes: stop when standard input closes, that is when the dev
 * supervisor is gone (even killed), so no node outlives it holding its ports and data.
 */
export const supervisedEnv = 'SHOAL_DEV_SUPERVISED';

export const serveHelp = `Usage: shoal serve --config FILE [--peers HOST:PORT[,HOST:PORT...]] [--log-level LEVEL] [--log-format json|text] [--json]

Runs a node: the Raft peer transport, the client API and the control loops, from a YAML or
JSON config file (see docs/operations.md for every key and its default). Stops gracefully on
SIGINT or SIGTERM: a leader transfers leadership to another voter before exiting.

Options:
  --config FILE        the config file (required)
  --peers LIST         peer addresses (HOST:PORT, comma-separated) where some members listen
                       now: after every machine got a new address, the node dials them, learns
                       which member answers there from its certificate, and the members find
                       each other from there (added to the config's peer.peers;
                       docs/operations.md, "Changing addresses")
  --log-level LEVEL    debug, info, warn or error (default: the config's logLevel, info);
                       debug adds a line per write with its proposal id, on the node that took
                       it and on the leader (docs/monitoring.md, "Following one write")
  --log-format FORMAT  json: one JSON object per line on stderr, with the node's name and id,
                       term and role (for journald, Loki, jq); text: human lines. Default: text
                       on a terminal or under 'shoal dev', json otherwise
  --json               log lines, and a failure to start, as JSON objects (--log-format json)
  -h, --help           show this help

Exit codes: 0 stopped cleanly; 1 crashed (restart it); 2 invalid config; 4 data corruption;
5 removed from the cluster; 6 upgrade required (a newer release wrote the log); 7 unknown
storage format; 8 an address cannot be bound; 9 the join failed. A service manager must not
restart on 2, 4, 5, 6 or 7 (docs/operations.md, "Exit codes").

From a built package the command runs from dist/serve.cjs with a V8 code cache that its first
start writes beside it (dist/serve.cjs.cache); SHOAL_CODE_CACHE=0 runs it from the ES modules
instead (docs/operations.md, "Start-up time").`;

/** `onServing` runs once the node serves its API (shoal init prints the join command then). */
export async function serveCommand(argv: string[], onServing?: (running: RunningNode) => void): Promise<number> {
  const { values, positionals } = parse(argv, {
    config: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
    'log-level': { type: 'string' }, 'log-format': { type: 'string' }, peers: { type: 'string' },
  }, serveHelp);
  if (values.help) {
    console.log(serveHelp);
    return exitCodes.ok;
  }
  // performance.now() counts from the process's start: Node's own start-up and loading the code
  // come before this line.
  const codeMs = performance.now();
  if (values.config === undefined) throw new UsageError('missing --config FILE');
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const peers = values.peers === undefined ? [] : parsePeers(values.peers);
  const flags = { level: values['log-level'], format: values['log-format'], json: values.json };
  const config = loadConfig(values.config);
  const log = await serveLogger(flags, config.logLevel, { stderrIsTty: process.stderr.isTTY, supervised: process.env[supervisedEnv] === '1' });
  await waitOutDrillHold(config.dataDir, log);
  const componentsMs = performance.now();
  const running = await startNode(config, log, { drillActions: true, peers });
  log.info(`node ${running.identity.name} (${running.identity.id}) serving the API on ${running.apiScheme}://${running.apiAddress}, `
    + startUpLine(codeMs, componentsMs, performance.now(), running.startTimes, cpuMs()));
  const allocator = allocatorLine(allocatorInUse());
  if (allocator !== undefined) log.info(allocator);
  onServing?.(running);
  const supervised = process.env[supervisedEnv] === '1';
  let onSupervisorGone = (): void => {};
  const failure = await new Promise<ShoalError | undefined>((resolve) => {
    const onSignal = (why: string): void => {
      log.info(`${why}: stopping`);
      void running.stop().then(() => resolve(undefined));
    };
    onSupervisorGone = () => onSignal('the shoal dev supervisor is gone (standard input closed)');
    process.once('SIGINT', () => onSignal('SIGINT received'));
    process.once('SIGTERM', () => onSignal('SIGTERM received'));
    if (supervised) {
      process.stdin.once('close', onSupervisorGone);
      process.stdin.resume();
    }
    // The node stopped for good (a fatal error, removed, upgrade required): the API answered 503
    // with the reason meanwhile; close it and exit with the code that says whether to restart.
    running.node.once('failed', (err) => {
      void running.stop().then(() => resolve(err));
    });
  });
  // A resumed standard input would keep the process alive after the node stopped.
  if (supervised) {
    process.stdin.off('close', onSupervisorGone);
    process.stdin.destroy();
  }
  if (failure === undefined) return exitCodes.ok;
  // A crash exits 1 (restart it); the causes a restart cannot cure have their own codes.
  const mapped = exitCodeOfError(failure.code, failure.retryable);
  const code = mapped === exitCodes.unavailable ? exitCodes.failed : mapped;
  log.error(`exiting with code ${code} (${failure.code}): ${failure.message}`);
  return code;
}

/** `--peers a:1,b:2`: every address HOST:PORT, at most 32 (as peer.peers). */
export function parsePeers(value: string): string[] {
  const list = value.split(',').map((a) => a.trim()).filter((a) => a.length > 0);
  if (list.length === 0) throw new UsageError('--peers needs at least one HOST:PORT');
  if (list.length > 32) throw new UsageError(`--peers takes at most 32 addresses, got ${list.length}`);
  for (const a of list) {
    const problem = hostPortProblem(a);
    if (problem !== undefined) throw new UsageError(`--peers: '${a}': ${problem}`);
  }
  return list;
}

/** CPU the process has used since it started, every thread, in ms. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}
