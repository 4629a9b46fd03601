// shoal node rotate-key NODE: the node makes a new WireGuard key pair (docs/network.md, "Rotating
// a node's key"). The private key never leaves the node, so the command finds the node's own API
// address from its record and asks it there (POST /v1/mesh/rotate-key), as a drill asks its target.
// shoal node rm NODE: the record of a node that left the cluster goes (DELETE /v1/nodes/{ref}).

import { z } from 'zod';
import { exitCodes, parse } from './args.ts';
import { request, resolveAddr } from './client.ts';
import { oneName } from './control-args.ts';
import { nodeDetailSchema, paths, read } from './control-api.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp } from './group.ts';

export const nodeRotateKeyHelp = `Usage: shoal node rotate-key NODE [--addr HOST:PORT] [--json]

Replaces a node's WireGuard key pair (by name or id). The node makes the new pair itself, commits
the new public key to its record, stores the private key (DATA/mesh/private.key, mode 0600) and
gives it to its interface; every peer takes the new public key from the record. Until a peer
has, their handshakes fail: tens of milliseconds, up to WireGuard's 5 s handshake retry. Needs the admin role
and a quorum (without one nothing changes). Rotate after a machine's disk may have leaked, or on
a schedule.

Options:
${commonFlagsHelp}

With --json prints {node, publicKey}.
${clientExitCodes} A node without a mesh section in its config exits 1 (not_found).`;

const answerSchema = z.object({ node: z.string(), publicKey: z.string() }).loose();

export async function nodeRotateKeyCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags }, nodeRotateKeyHelp);
  if (values.help) return help(nodeRotateKeyHelp);
  const ref = oneName(positionals, 'NODE');
  const detail = await read(resolveAddr(values.addr), paths.node(ref), nodeDetailSchema, 'node rotate-key');
  const { record, name } = detail.node;
  const { body } = await request(record.addresses.api, 'POST', '/v1/mesh/rotate-key', answerSchema, { body: {}, timeoutMs: 15_000 });
  if (values.json) console.log(JSON.stringify(body));
  else console.log(`${name}: new WireGuard public key ${body.publicKey}; its peers take it from its record`);
  return exitCodes.ok;
}

export const nodeRmHelp = `Usage: shoal node rm NODE [--addr HOST:PORT] [--json]

Removes the record of a node (by name or id) that was removed from the cluster (shoal cluster
remove, the autopilot's dead member cleanup, or shoal recover --force-new-cluster on a survivor),
as 'docker node rm' does: it leaves 'shoal node ls', and its mesh address is free again. Refused
(resource_in_use) while the node is a member (remove it from the cluster first) or while the
leader has not yet replaced a task it ran. Needs the admin role.

Options:
${commonFlagsHelp}

With --json prints {id, name, removed, rev}.
${clientExitCodes} A member, or a node with tasks not yet replaced, exits 1 (resource_in_use).`;

const removedSchema = z.object({ id: z.string(), name: z.string(), removed: z.literal(true), rev: z.number().nullable() }).loose();

export async function nodeRmCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags }, nodeRmHelp);
  if (values.help) return help(nodeRmHelp);
  const ref = oneName(positionals, 'NODE');
  const { body } = await request(resolveAddr(values.addr), 'DELETE', paths.node(ref), removedSchema, {});
  if (values.json) console.log(JSON.stringify(body));
  else console.log(`removed the record of node ${body.name} (${body.id})`);
  return exitCodes.ok;
}
