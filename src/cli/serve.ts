// shoal serve: runs one node from a config file until SIGINT/SIGTERM, then stops gracefully
// (a leader hands leadership away first).

import { loadConfig } from '../node/config.ts';
import { startNode } from '../node/server.ts';
import { exitCodeOfError, exitCodes, parse, UsageError } from './args.ts';
import type { ShoalError } from '../errors.ts';
import { consoleLogger } from './logger.ts';

export const serveHelp = `Usage: shoal serve --config FILE

Runs a node: the Raft peer transport, the client API and the control loops, from a YAML or
JSON config file (see docs/operations.md for every key and its default). Stops gracefully on
SIGINT or SIGTERM: a leader transfers leadership to another voter before exiting.

Options:
  --config FILE   the config file (required)
  -h, --help      show this help

Exit codes: 0 stopped cleanly; 1 crashed (restart it); 2 invalid config; 4 data corruption;
5 removed from the cluster; 6 upgrade required (a newer release wrote the log); 7 unknown
storage format; 8 an address cannot be bound; 9 the join failed. A service manager must not
restart on 2, 4, 5, 6 or 7 (docs/operations.md, "Exit codes").`;

export async function serveCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, { config: { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } }, 'serve');
  if (values.help) {
    console.log(serveHelp);
    return exitCodes.ok;
  }
  if (values.config === undefined) throw new UsageError("--config is required; run 'shoal serve --help'");
  const config = loadConfig(values.config);
  const log = consoleLogger(config.logLevel);
  const running = await startNode(config, log);
  log.info(`node ${running.identity.name} (${running.identity.id}) serving the API on http://${running.apiAddress}`);
  const failure = await new Promise<ShoalError | undefined>((resolve) => {
    const onSignal = (sig: string): void => {
      log.info(`${sig} received: stopping`);
      void running.stop().then(() => resolve(undefined));
    };
    process.once('SIGINT', () => onSignal('SIGINT'));
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    // The node stopped for good (a fatal error, removed, upgrade required): the API answered 503
    // with the reason meanwhile; close it and exit with the code that says whether to restart.
    running.node.once('failed', (err) => {
      void running.stop().then(() => resolve(err));
    });
  });
  if (failure === undefined) return exitCodes.ok;
  const code = exitCodeOfError(failure.code, failure.retryable);
  log.error(`exiting with code ${code} (${failure.code}): ${failure.message}`);
  // A crash exits 1 (restart it); the causes a restart cannot cure have their own codes.
  return code === exitCodes.unavailable ? exitCodes.failed : code;
}
