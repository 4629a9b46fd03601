// `--credential FILE` and `--context NAME` are taken by every command that talks to a node, so
// main.ts takes them off the command line before the command parses its own flags. Both name
// the credential to use; `init`, `dev` and `login` add their context under the --context name.

import { UsageError } from './args.ts';
import { contextNamePattern, contextNameRule } from './contexts.ts';

export { useCredentialFlag, useCredentialFlags } from './credential-file.ts';

/** Removes `--NAME VALUE` (or `--NAME=VALUE`) from argv in place; returns VALUE. */
function takeFlag(argv: string[], name: string, what: string): string | undefined {
  let found: string | undefined;
  const flag = `--${name}`;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--') break;
    if (a !== flag && !a.startsWith(`${flag}=`)) continue;
    const value = a === flag ? argv[i + 1] : a.slice(flag.length + 1);
    if (value === undefined || value === '' || value.startsWith('-')) throw new UsageError(`option ${flag} needs a value (${what})`);
    if (found !== undefined) throw new UsageError(`${flag} given twice`);
    found = value;
    argv.splice(i, a === flag ? 2 : 1);
    i--;
  }
  return found;
}

/** Removes `--credential FILE` (or `--credential=FILE`) from argv in place; returns FILE. */
export function takeCredentialFlag(argv: string[]): string | undefined {
  return takeFlag(argv, 'credential', 'a credential file');
}

/** Removes --credential and --context from argv in place; both at once is a usage error. */
export function takeCredentialFlags(argv: string[]): { credential?: string; context?: string } {
  const credential = takeCredentialFlag(argv);
  const context = takeFlag(argv, 'context', 'a context name, from shoal context ls');
  if (credential !== undefined && context !== undefined) throw new UsageError('give --credential FILE or --context NAME, not both: each names the credential to use');
  if (context !== undefined && !contextNamePattern.test(context)) throw new UsageError(`--context '${context}': a context name is ${contextNameRule}`);
  return { ...(credential !== undefined ? { credential } : {}), ...(context !== undefined ? { context } : {}) };
}
