// shoal init: creates a node's data directory, identity and certificates, and a config file.

import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { initNode } from '../node/identity.ts';
import { splitHostPort } from '../node/config.ts';
import { exitCodes, parse, UsageError } from './args.ts';

export const initHelp = `Usage: shoal init --data DIR --name NAME [--ca-from DIR] [--api HOST:PORT] [--peer HOST:PORT] [--host H ...] [--json]

Creates a node's data directory: a stable random node id, the cluster CA (for the first node of
a new cluster) or a certificate signed by an existing cluster's CA (--ca-from), and DIR/shoal.yaml,
a config file for 'shoal serve'.

Options:
  --data DIR         data directory to create (required)
  --name NAME        a human name for the node (required)
  --ca-from DIR      data directory of the node that holds the cluster CA key: join its cluster
  --api HOST:PORT    client API listen address (default 127.0.0.1:7101)
  --peer HOST:PORT   peer transport listen address (default 127.0.0.1:7201)
  --host H           an extra name or IP the node's certificate is valid for (repeatable)
  --json             print the new identity as JSON
  -h, --help         show this help

A founding member's config needs a 'bootstrap' list naming every founding member (id, name,
peerAddress, apiAddress); see docs/operations.md.
Exit codes: 0 created, 1 failed (e.g. already initialized), 2 usage error.`;

export async function initCommand(argv: string[]): Promise<number> {
  const { values } = parse(argv, {
    data: { type: 'string' }, name: { type: 'string' }, 'ca-from': { type: 'string' },
    api: { type: 'string', default: '127.0.0.1:7101' }, peer: { type: 'string', default: '127.0.0.1:7201' },
    host: { type: 'string', multiple: true, default: [] }, json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  }, 'init');
  if (values.help) {
    console.log(initHelp);
    return exitCodes.ok;
  }
  if (values.data === undefined || values.name === undefined) throw new UsageError("--data and --name are required; run 'shoal init --help'");
  const hosts = [...values.host, splitHostPort(values.api).host, splitHostPort(values.peer).host];
  const identity = await initNode({
    dataDir: values.data, name: values.name, hosts, ...(values['ca-from'] !== undefined ? { caFrom: values['ca-from'] } : {}),
  });
  const configFile = path.join(values.data, 'shoal.yaml');
  if (!existsSync(configFile)) {
    writeFileSync(configFile, stringify({ dataDir: '.', api: { listen: values.api }, peer: { listen: values.peer } }));
  }
  if (values.json) console.log(JSON.stringify({ ...identity, dataDir: path.resolve(values.data), config: path.resolve(configFile) }));
  else console.log(`initialized node ${identity.name} (${identity.id}) of cluster ${identity.clusterId} in ${values.data}\nconfig: ${configFile}`);
  return exitCodes.ok;
}
