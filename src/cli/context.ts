// shoal context ls|use|rm|show: the local user's credentials, one per cluster, by name
// (contexts.ts keeps them). Nothing here talks to a node.

import { ShoalError } from '../errors.ts';
import { didYouMean, exitCodes, parse, UsageError } from './args.ts';
import { configDir, contextNamed, currentContext, listContexts, removeContext, useContext, type ContextEntry } from './contexts.ts';
import { readCredentialFile, type CredentialFile } from './credential-format.ts';
import { contextFlag, findCredential, foundLabel } from './credential-file.ts';
import { tableText } from './control-format.ts';
import { help } from './doc-common.ts';
import { groupHelp, runGroup, type Group } from './group.ts';

export const contextLsHelp = `Usage: shoal context ls [--json]

Lists this user's contexts ($SHOAL_CONFIG/contexts, else ~/.config/shoal/contexts): each is a
credential for one cluster, added by 'shoal init', 'shoal dev' and 'shoal login'. The one a
command would use is marked '*': --context NAME, else $SHOAL_CONTEXT, else the current one
('shoal context use'). A credential.json of before contexts is listed as 'default'.

Options:
  --json       {current, inUse, contexts: [{name, file, current, inUse, clusterId, principal,
               role, auth, addresses} or {name, file, current, inUse, problem}]}
  -h, --help   show this help

Exit codes: 0; 2 usage error.`;

export const contextUseHelp = `Usage: shoal context use NAME [--json]

Makes NAME the current context: the credential every command uses unless --credential,
--context or $SHOAL_CONTEXT says otherwise.

Options:
  --json       {current, file}
  -h, --help   show this help

Exit codes: 0; 1 no such context (not_found); 2 usage error.`;

export const contextRmHelp = `Usage: shoal context rm NAME [--force] [--json]

Deletes the context NAME: its credential file, private key included. The cluster is not told
(revoke a certificate with 'shoal cert revoke --cert FILE' first if it may have leaked). The
current context is removed only with --force, and then no context is current.

Options:
  --force      remove it even when it is the current context
  --json       {removed, file, wasCurrent}
  -h, --help   show this help

Exit codes: 0; 1 no such context (not_found); 2 usage error, or the current one without --force.`;

export const contextShowHelp = `Usage: shoal context show [--json]

Prints the context a command run like this would use, and why (--context, $SHOAL_CONTEXT, the
current one), with its cluster, principal and first address; or that there is none.

Options:
  --json       {name, file, why, clusterId, principal, role, addresses}
  -h, --help   show this help

Exit codes: 0; 1 there is no context to use (not_found); 2 usage error.`;

export const contextGroup: Group = {
  name: 'context',
  about: `This user's credentials, one per cluster, kept by name in $SHOAL_CONFIG when it is set,
else in ~/.config/shoal (docs/security.md, "Contexts"). The current one is what every command
uses unless --context NAME, $SHOAL_CONTEXT or --credential FILE says otherwise. 'shoal init',
'shoal dev' and 'shoal login' add one and make it current; adding never replaces another
cluster's context. Nothing here talks to a node.`,
  subcommands: {
    ls: { summary: 'list contexts; the one in use is marked *', help: contextLsHelp, run: lsCommand },
    use: { summary: 'make a context the current one', help: contextUseHelp, run: useCommand },
    rm: { summary: 'delete a context (its credential file)', help: contextRmHelp, run: rmCommand },
    show: { summary: 'the context a command would use, and why', help: contextShowHelp, run: showCommand },
  },
};

export const contextGroupHelp = groupHelp(contextGroup);

export function contextCommand(argv: string[]): Promise<number> {
  return runGroup(contextGroup, argv);
}

const flags = { json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } } as const;

function oneName(positionals: string[]): string {
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? 'missing NAME (shoal context ls lists them)' : `expected one NAME, got '${positionals.join(' ')}'`);
  return positionals[0] ?? '';
}

function noSuchContext(name: string, dir: string): ShoalError {
  const known = listContexts(dir).map((c) => c.name);
  return new ShoalError('not_found', `no context '${name}'${didYouMean(name, known)}; ${known.length > 0 ? `the contexts are ${known.join(', ')}` : 'there are none'} (in ${dir})`, { name });
}

/** The context the rules pick for this run, if any (--credential picks none). */
function inUse(): string | undefined {
  try {
    return findCredential(undefined, contextFlag())?.context;
  } catch {
    return undefined;
  }
}

interface Row {
  entry: ContextEntry;
  credential?: CredentialFile;
  problem?: string;
}

function readRow(entry: ContextEntry): Row {
  try {
    return { entry, credential: readCredentialFile(entry.file, `context ${entry.name}`) };
  } catch (err) {
    return { entry, problem: (err as Error).message.split('\n').slice(0, 2).join(' ').trim() };
  }
}

async function lsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, flags, contextLsHelp);
  if (values.help) return help(contextLsHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const { dir } = configDir();
  const rows = listContexts(dir).map(readRow);
  const current = currentContext(dir)?.name;
  const using = inUse();
  if (values.json) {
    console.log(JSON.stringify({
      current: current ?? null, inUse: using ?? null,
      contexts: rows.map(({ entry, credential: c, problem }) => ({
        name: entry.name, file: entry.file, current: entry.name === current, inUse: entry.name === using,
        ...(c !== undefined ? { clusterId: c.clusterId, principal: c.principal, role: c.role, auth: c.token !== undefined ? 'token' : 'certificate', addresses: c.addresses } : { problem }),
      })),
    }, null, 2));
    return exitCodes.ok;
  }
  if (rows.length === 0) {
    console.log(`no contexts in ${dir}: 'shoal login', 'shoal init' and 'shoal dev' add one`);
    return exitCodes.ok;
  }
  const cells = rows.map(({ entry, credential: c, problem }) => [
    entry.name === using ? '*' : '', entry.name,
    ...(c !== undefined
      ? [c.clusterId, c.principal, c.role, c.token !== undefined ? 'token' : 'certificate', `${c.addresses[0] ?? ''}${c.addresses.length > 1 ? ` (+${c.addresses.length - 1})` : ''}`]
      : ['?', '?', '?', '?', `invalid: ${problem ?? ''}`]),
  ]);
  console.log(tableText(['', 'NAME', 'CLUSTER', 'PRINCIPAL', 'ROLE', 'AUTH', 'ADDRESS'], cells));
  return exitCodes.ok;
}

async function useCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, flags, contextUseHelp);
  if (values.help) return help(contextUseHelp);
  const { dir } = configDir();
  const name = oneName(positionals);
  if (contextNamed(dir, name) === undefined) throw noSuchContext(name, dir);
  const entry = useContext(dir, name);
  if (values.json) console.log(JSON.stringify({ current: entry.name, file: entry.file }));
  else console.log(`the current context is now ${entry.name} (${entry.file})${process.env.SHOAL_CONTEXT ? `; $SHOAL_CONTEXT (${process.env.SHOAL_CONTEXT}) still wins while it is set` : ''}`);
  return exitCodes.ok;
}

async function rmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...flags, force: { type: 'boolean', default: false } }, contextRmHelp);
  if (values.help) return help(contextRmHelp);
  const { dir } = configDir();
  const name = oneName(positionals);
  if (contextNamed(dir, name) === undefined) throw noSuchContext(name, dir);
  if (currentContext(dir)?.name === name && !values.force) {
    throw new UsageError(`'${name}' is the current context; give --force to remove it anyway (then no context is current), or make another current first: shoal context use NAME`);
  }
  const { entry, wasCurrent } = removeContext(dir, name);
  if (values.json) console.log(JSON.stringify({ removed: entry.name, file: entry.file, wasCurrent }));
  else console.log(`removed the context ${entry.name} (${entry.file})${wasCurrent ? "; no context is current now: pick one with 'shoal context use NAME'" : ''}`);
  return exitCodes.ok;
}

async function showCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, flags, contextShowHelp);
  if (values.help) return help(contextShowHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const found = findCredential(undefined, contextFlag());
  if (found === undefined) {
    throw new ShoalError('not_found', `no context to use: none is current in ${configDir().dir}, and neither --context nor $SHOAL_CONTEXT names one (shoal context ls, shoal context use NAME)`);
  }
  const c = readCredentialFile(found.file, foundLabel(found));
  if (values.json) console.log(JSON.stringify({ name: found.context, file: found.file, why: found.source, clusterId: c.clusterId, principal: c.principal, role: c.role, addresses: c.addresses }));
  else console.log(`${found.context ?? ''} (${foundLabel(found)}): cluster ${c.clusterId}, ${c.principal} (${c.role}), ${c.addresses[0] ?? ''}; ${found.file}`);
  return exitCodes.ok;
}
