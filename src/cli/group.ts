// A command group (`shoal doc`, `shoal cluster`, `shoal snapshot`): dispatches to its
// subcommands, prints the group's help, and turns client failures into messages and exit codes.

import { didYouMean, exitCodes, UsageError, wantsJson } from './args.ts';
import { reportError } from './report.ts';

export interface Subcommand {
  summary: string;
  /** Its --help text; a usage error repeats its usage line. */
  help: string;
  run: (argv: string[]) => Promise<number>;
}

export interface Group {
  name: string;
  /** One paragraph under the usage line. */
  about: string;
  subcommands: Record<string, Subcommand>;
}

/** Flags every client command takes, for the help texts; `pad` aligns them with a command's own. */
export function commonFlagsText(pad = 19): string {
  return [
    ['--addr HOST:PORT', "a node's client API (default $SHOAL_ADDR, else 127.0.0.1:7101)"],
    ['--json', 'machine-readable output (errors too, as one JSON object on stderr)'],
    ['-h, --help', 'show this help'],
  ].map(([flag, text]) => `  ${(flag ?? '').padEnd(pad)}${text ?? ''}`).join('\n');
}

export const commonFlagsHelp = commonFlagsText();

export const clientExitCodes = `Exit codes: 0 ok; 1 the request failed (not found, revision mismatch, invalid request: the
message says which); 2 usage error; 3 no node answered, or the cluster cannot serve right now
(no leader, timeout): retry later or ask another node with --addr.`;

export function groupHelp(g: Group): string {
  const width = Math.max(...Object.keys(g.subcommands).map((s) => s.length));
  return `Usage: shoal ${g.name} <subcommand> [options]

${g.about}

Subcommands:
${Object.entries(g.subcommands).map(([name, s]) => `  ${name.padEnd(width)}  ${s.summary}`).join('\n')}

Run 'shoal ${g.name} <subcommand> --help' for its options.
${clientExitCodes}`;
}

export async function runGroup(g: Group, argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === 'help' || name === '--help' || name === '-h') {
    console.log(groupHelp(g));
    return exitCodes.ok;
  }
  const json = wantsJson(argv);
  const sub = name === undefined ? undefined : g.subcommands[name];
  if (name === undefined || sub === undefined) {
    const what = name === undefined ? 'missing subcommand' : name.startsWith('-') ? `expected a subcommand before ${name}` : `unknown subcommand '${name}'${didYouMean(name, Object.keys(g.subcommands))}`;
    const usage = `Usage: shoal ${g.name} <subcommand> [options]\nSubcommands: ${Object.keys(g.subcommands).join(', ')}`;
    return reportError(g.name, new UsageError(what, usage), json);
  }
  try {
    return await sub.run(rest);
  } catch (err) {
    return reportError(`${g.name} ${name}`, err, json, sub.help);
  }
}
