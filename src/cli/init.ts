// shoal init: creates a node's data directory, identity and certificates, and a config file.
// Everything the flags say is checked first, with the rules `shoal serve` applies to the config
// (src/node/config.ts) and the node-name rule, so a bad flag is refused here and nothing is written.

import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { configSchema, splitHostPort } from '../node/config.ts';
import { initNode, nodeNamePattern, nodeNameRule } from '../node/identity.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { userCredentialFile } from './credential-file.ts';
import { writeAdminCredential } from './credential-issue.ts';

/** Defaults for a real node, clear of `shoal dev`'s ports (7101-7107 API, 7201-7207 peer). */
export const initApiDefault = '127.0.0.1:7100';
export const initPeerDefault = '127.0.0.1:7200';

export const initHelp = `Usage: shoal init --data DIR --name NAME [--ca-from DIR] [--api HOST:PORT] [--peer HOST:PORT] [--host H ...] [--json]

Creates a node's data directory: a stable random node id, the cluster CA (for the first node of
a new cluster) or a certificate signed by an existing cluster's CA (--ca-from), and DIR/shoal.yaml,
a config file for 'shoal serve'. The flags are checked first; a bad one writes nothing. A new
cluster's first node also writes an admin credential for the local user to
$SHOAL_CONFIG/credential.json (else ~/.config/shoal/credential.json), which the CLI finds.

Options:
  --data DIR         data directory to create (required)
  --name NAME        the node's name, unique in its cluster (required): ${nodeNameRule}
  --ca-from DIR      data directory of the node that holds the cluster CA key: join its cluster
  --api HOST:PORT    client API listen address (default ${initApiDefault})
  --peer HOST:PORT   peer transport listen address (default ${initPeerDefault})
  --host H           an extra name or IP the node's certificate is valid for (repeatable)
  --json             print the new identity as JSON
  -h, --help         show this help

The default ports (7100, 7200) stay clear of 'shoal dev' (7101-7107, 7201-7207), so a node and a
dev cluster can run on one machine. Ports are 1 to 65535.
A founding member's config needs a 'bootstrap' list naming every founding member (id, name,
peerAddress, apiAddress); see docs/operations.md.
Exit codes: 0 created, 2 usage error or already initialized (nothing written), 1 failed.`;

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

export async function initCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    data: { type: 'string' }, name: { type: 'string' }, 'ca-from': { type: 'string' },
    api: { type: 'string', default: initApiDefault }, peer: { type: 'string', default: initPeerDefault },
    host: { type: 'string', multiple: true, default: [] }, json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
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
  const identity = await initNode({ dataDir: data, name, hosts, ...(values['ca-from'] !== undefined ? { caFrom: values['ca-from'] } : {}) });
  const configFile = path.join(data, 'shoal.yaml');
  if (!existsSync(configFile)) {
    writeFileSync(configFile, stringify({ dataDir: '.', api: { listen: values.api }, peer: { listen: values.peer } }));
  }
  // The founder holds the CA key: it makes the local user's admin credential, which the CLI finds.
  const credential = values['ca-from'] === undefined ? userCredentialFile() : null;
  if (credential !== null) await writeAdminCredential(data, [values.api], [credential]);
  if (values.json) console.log(JSON.stringify({ ...identity, dataDir: path.resolve(data), config: path.resolve(configFile), credential }));
  else console.log(`initialized node ${identity.name} (${identity.id}) of cluster ${identity.clusterId} in ${data}\nconfig: ${configFile}\napi ${values.api}, peer ${values.peer}${credential !== null ? `\nadmin credential: ${credential}` : ''}`);
  return exitCodes.ok;
}
