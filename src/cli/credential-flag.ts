// `--credential FILE` is taken by every command that talks to a node, so main.ts takes it off
// the command line before the command parses its own flags.

import { UsageError } from './args.ts';

export { useCredentialFlag } from './credential-file.ts';

/** Removes `--credential FILE` (or `--credential=FILE`) from argv in place; returns FILE. */
export function takeCredentialFlag(argv: string[]): string | undefined {
  let found: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--') break;
    if (a !== '--credential' && !a.startsWith('--credential=')) continue;
    const value = a === '--credential' ? argv[i + 1] : a.slice('--credential='.length);
    if (value === undefined || value === '' || value.startsWith('-')) throw new UsageError('option --credential needs a value (a credential file)');
    if (found !== undefined) throw new UsageError('--credential given twice');
    found = value;
    argv.splice(i, a === '--credential' ? 2 : 1);
    i--;
  }
  return found;
}
