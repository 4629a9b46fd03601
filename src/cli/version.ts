// shoal version (and shoal --version): which release this command is, without asking any node.

import { featureLevelMax } from '../base/feature-level.ts';
import { softwareVersion } from '../version.ts';
import { exitCodes, parse, UsageError } from './args.ts';

export const versionHelp = `Usage: shoal version [--json]

Prints the version of this shoal command (the same as 'shoal --version'), and of Node.js. The
version each node runs is in 'shoal cluster status' (VERSION column) and GET /v1/cluster.

Options:
  --json             print {version, node, platform, featureLevelMax} (the highest cluster
                     feature level this build can apply)
  -h, --help         show this help

Exit codes: 0 ok, 2 usage error.`;

export async function versionCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } }, versionHelp);
  if (values.help) {
    console.log(versionHelp);
    return exitCodes.ok;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  if (values.json) console.log(JSON.stringify({ version: softwareVersion, node: process.version, platform: `${process.platform}-${process.arch}`, featureLevelMax }));
  else console.log(`shoal ${softwareVersion} (Node.js ${process.version}, ${process.platform}-${process.arch})`);
  return exitCodes.ok;
}
