// The `shoal` command: dispatches to subcommands and maps failures to exit codes.

import { isShoalError } from '../errors.ts';
import { exitCodeOfError, exitCodes, UsageError } from './args.ts';

type Run = (argv: string[]) => Promise<number>;

// Commands load lazily: `shoal status` should not pay for loading the storage engine.
const commands: Record<string, { load: () => Promise<Run>; summary: string }> = {
  init: { load: async () => (await import('./init.ts')).initCommand, summary: "create a node's data directory, identity and certificates" },
  serve: { load: async () => (await import('./serve.ts')).serveCommand, summary: 'run a node from a config file' },
  dev: { load: async () => (await import('./dev.ts')).devCommand, summary: 'start a local three-node cluster (separate processes)' },
  status: { load: async () => (await import('./status.ts')).statusCommand, summary: 'show leader, term, commit index and members' },
  doc: { load: async () => (await import('./doc.ts')).docCommand, summary: 'get, put, rm, ls and watch documents' },
  cluster: { load: async () => (await import('./cluster.ts')).clusterCommand, summary: 'members, add, promote, remove, transfer-leader' },
  snapshot: { load: async () => (await import('./snapshot.ts')).snapshotCommand, summary: 'save a snapshot to a file; restore one into a new cluster' },
};

export const mainHelp = `Usage: shoal <command> [options]

Commands:
${Object.entries(commands).map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`).join('\n')}

Run 'shoal <command> --help' for a command's options. Docs: docs/operations.md, docs/cli.md.`;

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    console.log(mainHelp);
    return name === undefined ? exitCodes.usage : exitCodes.ok;
  }
  const command = commands[name];
  if (command === undefined) {
    console.error(`shoal: unknown command '${name}'\n\n${mainHelp}`);
    return exitCodes.usage;
  }
  try {
    return await (await command.load())(rest);
  } catch (err) {
    return report(name, err);
  }
}

function report(command: string, err: unknown): number {
  if (err instanceof UsageError) {
    console.error(`shoal ${command}: ${err.message}`);
    return exitCodes.usage;
  }
  if (isShoalError(err)) {
    console.error(`shoal ${command}: ${err.message}`);
    return exitCodeOfError(err.code, err.retryable);
  }
  const e = err as Error & { name?: string; file?: string; recovery?: string };
  if (e?.name === 'StorageCorruptionError') {
    console.error(`shoal ${command}: ${e.message}${e.file ? `\n  file: ${e.file}` : ''}${e.recovery ? `\n  what to do: ${e.recovery}` : ''}`);
    return exitCodes.corrupt;
  }
  if (e?.name === 'StorageFormatError') {
    console.error(`shoal ${command}: ${e.message}`);
    return exitCodes.storageFormat;
  }
  console.error(`shoal ${command}: unexpected error: ${e?.stack ?? String(err)}`);
  return exitCodes.failed;
}

