// shoal init: founds a one-node cluster (data directory, identity, CA, certificates, a config
// with itself as the bootstrap list, the first voter token) and runs it. Everything the flags
// say is checked first, with the rules `shoal serve` applies to the config (src/server/config.ts)
// and the node-name rule, so a bad flag is refused here and nothing is written.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { configSchema, splitHostPort } from '../server/config.ts';
import { initNode, nodeNamePattern, nodeNameRule } from '../node/identity.ts';
import { foundKeyring } from '../node/secrets/pending-keyring.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { addAdminContext } from './credential-issue.ts';

/** Defaults for a real node, clear of `shoal dev`'s ports (7101-7107 API, 7201-7207 peer). */
export const initApiDefault = '127.0.0.1:7100';
export const initPeerDefault = '127.0.0.1:7200';

export const initHelp = `Usage: shoal init --data DIR --name NAME [--api HOST:PORT] [--peer HOST:PORT] [--host H ...] [--no-start] [--json]
       shoal init --data DIR --name NAME --ca-from DIR [...]   (prepare a node of an existing cluster by hand)

Founds a new cluster on this machine: creates DIR with a stable random node id, the cluster CA
(its key stays in DIR/tls, on voters only), this node's certificate, and DIR/shoal.yaml naming
this node as the one founding member. Runs the node as 'shoal serve' does (unless --no-start)
and, once the node leads and has written the token into the store (a second or two), prints the
command that joins another machine:

  shoal join <this node's API> --token <a voter token, valid for 1 h>

Three machines take three commands: init here, join on the two others. The flags are checked
first; a bad one writes nothing.
It prints the cluster's recovery key, once: keep it offline. A snapshot restored on new machines
reads its secrets only with it (shoal snapshot restore --recovery-key-file; docs/security.md).
It also adds an admin credential for the local user as the context NAME (or --context's name;
another cluster's context of that name is kept and this one gets a suffix) and makes it current,
in $SHOAL_CONFIG/contexts (else ~/.config/shoal/contexts): 'shoal context ls' lists them.

Options:
  --data DIR         data directory to create (required)
  --name NAME        the node's name, unique in its cluster (required): ${nodeNameRule}
  --api HOST:PORT    client API listen address (default ${initApiDefault}); joining machines reach it here
  --peer HOST:PORT   peer transport listen address (default ${initPeerDefault})
  --host H           an extra name or IP the node's certificate is valid for (repeatable)
  --no-start         write DIR and exit; start it with 'shoal serve --config DIR/shoal.yaml'
                     (the join token becomes valid when the node first runs)
  --ca-from DIR      instead of founding a cluster: sign this node's certificate with the CA key
                     in DIR (a member's data directory) and write a config without a bootstrap
                     list, for 'shoal cluster add' by hand (docs/operations.md); never starts
  --json             print the new identity, the join command and the recovery key as one
                     JSON object (when the command works, as above)
  -h, --help         show this help

The default ports (7100, 7200) stay clear of 'shoal dev' (7101-7107, 7201-7207), so a node and a
dev cluster can run on one machine. Ports are 1 to 65535.
Exit codes: 0 created (with --no-start or --ca-from) or the node stopped cleanly; 2 usage error or
already initialized (nothing written); 1 failed; otherwise those of 'shoal serve'.`;

/** How the recovery key is shown, the one time it is. */
export function recoveryKeyNotice(recoveryKey: string): string {
  return `
Recovery key (shown this once; nothing keeps it). Store it offline, apart from your backups:
with it, a snapshot restored on new machines can read its secrets; without it, it cannot.

  ${recoveryKey}
`;
}

/** Every problem with the flags at once, in the flags' own names. */
function checkFlags(name: string, api: string, peer: string): void {
  const problems: string[] = [];
  if (!nodeNamePattern.test(name)) problems.push(`--name '${name}': a node name is ${nodeNameRule}`);
  const parsed = configSchema.safeParse({ dataDir: '.', api: { listen: api }, peer: { listen: peer } });
  if (!parsed.success) {
    const flags: Record<string, [flag: string, value: string]> = { 'api.listen': ['--api', api], 'peer.listen': ['--peer', peer] };
    for (const i of parsed.error.issues) {
      const [flag, value] = flags[i.path.join('.')] ?? [i.path.join('.'), ''];
      problems.push(`${flag} '${value}': ${i.message.replaceAll('api.listen', '--api')}`);
    }
  }
  if (problems.length === 1) throw new UsageError(problems[0] ?? '');
  if (problems.length > 1) throw new UsageError(`${problems.length} problems:\n${problems.map((p) => `  ${p}`).join('\n')}`);
}

/** Makes the founding voter token: the node writes its record when it first leads (src/security/founding-token.ts). */
async function foundingToken(dataDir: string): Promise<string> {
  const { fingerprintOf } = await import('../security/authority.ts');
  const { formatToken, hashSecret, newToken, tokenTtlMsDefault } = await import('../security/tokens.ts');
  const { saveFoundingToken } = await import('../security/founding-token.ts');
  const t = newToken(fingerprintOf(readFileSync(path.join(dataDir, 'tls', 'ca.crt'), 'utf8')));
  const now = Date.now();
  saveFoundingToken(dataDir, {
    id: t.id, role: 'voter', secretSha256: hashSecret(t.secret), createdAtMs: now, expiresAtMs: now + tokenTtlMsDefault,
    usesMax: 2, usesLeft: 2, labels: { by: 'shoal-init' }, createdBy: 'shoal-init', revoked: false, redemptions: [],
  });
  return formatToken(t);
}

export async function initCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    data: { type: 'string' }, name: { type: 'string' }, 'ca-from': { type: 'string' },
    api: { type: 'string', default: initApiDefault }, peer: { type: 'string', default: initPeerDefault },
    host: { type: 'string', multiple: true, default: [] }, json: { type: 'boolean', default: false },
    'no-start': { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, initHelp);
  if (values.help) {
    console.log(initHelp);
    return exitCodes.ok;
  }
  const missing = (['data', 'name'] as const).filter((k) => values[k] === undefined).map((k) => `--${k}`);
  if (missing.length > 0) throw new UsageError(`missing ${missing.join(' and ')}`);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const data = values.data ?? '';
  const name = values.name ?? '';
  checkFlags(name, values.api, values.peer);
  const hosts = [...values.host, splitHostPort(values.api).host, splitHostPort(values.peer).host];
  const caFrom = values['ca-from'];
  const identity = await initNode({ dataDir: data, name, hosts, ...(caFrom !== undefined ? { caFrom } : {}) });
  const configFile = path.join(data, 'shoal.yaml');
  const founds = caFrom === undefined;
  if (!existsSync(configFile)) {
    const bootstrap = founds ? { bootstrap: [{ id: identity.id, name, peerAddress: values.peer, apiAddress: values.api }] } : {};
    writeFileSync(configFile, stringify({ dataDir: '.', api: { listen: values.api }, peer: { listen: values.peer }, ...bootstrap }));
  }
  // The founder holds the CA key: it makes the local user's admin credential, a context named after the node.
  const credential = founds ? (await addAdminContext(data, [values.api], name)).file : null;
  const token = founds ? await foundingToken(data) : undefined;
  const recoveryKey = founds ? foundKeyring([data]) : undefined;
  const joinCommand = token === undefined ? undefined : `shoal join ${values.api} --token ${token}`;
  const summary = {
    ...identity, dataDir: path.resolve(data), config: path.resolve(configFile), credential, ...(joinCommand !== undefined ? { joinCommand } : {}),
    ...(recoveryKey !== undefined ? { recoveryKey } : {}),
  };
  if (!values.json) console.log(`initialized node ${identity.name} (${identity.id}) of cluster ${identity.clusterId} in ${data}\nconfig: ${configFile}\napi ${values.api}, peer ${values.peer}${credential !== null ? `\nadmin credential: ${credential}` : ''}`);
  if (!values.json && recoveryKey !== undefined) console.log(recoveryKeyNotice(recoveryKey));
  const printJoin = (): void => {
    if (values.json) console.log(JSON.stringify(summary));
    else if (joinCommand !== undefined) console.log(`\nTo add a machine, run on it (the token is for 2 voters and valid for 1 h; more with 'shoal token create --role voter'):\n\n  ${joinCommand} --api <its address>:7100 --peer <its address>:7200\n`);
  };
  if (!founds || values['no-start']) {
    printJoin();
    return exitCodes.ok;
  }
  const { serveCommand } = await import('./serve.ts');
  // The join command is printed once it works: the node serves its API and, leading, has written
  // the token into the store (a join pasted at once is neither refused nor left unanswered).
  return serveCommand(['--config', configFile, ...(values.json ? ['--json'] : [])], (running) => {
    void running.foundingTokenWritten.then((written) => { if (written) printJoin(); });
  });
}
