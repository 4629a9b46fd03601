// shoal cluster: membership and leadership. Status and member listing read GET /v1/cluster;
// changes go to the leader (any node forwards them) as Raft configuration changes.

import { z } from 'zod';
import type { ClusterView, MemberView } from '../api/cluster-routes.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { checkHostPort, isClientFailure, request, resolveAddr, retryNotice, type ClientFailure } from './client.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, runGroup, type Group } from './group.ts';
import { statusCommand, table } from './status.ts';
import { untilInterrupted } from './watch-stream.ts';

const memberSchema = z.object({
  id: z.string(), name: z.string(), peerAddress: z.string(), apiAddress: z.string(), role: z.enum(['voter', 'learner']),
  matchIndex: z.number().nullable(), lag: z.number().nullable(), rttMs: z.number().nullable(), softwareVersion: z.string().nullable(),
  health: z.enum(['healthy', 'lagging', 'unreachable', 'unknown']),
}).loose();
const clusterViewSchema = z.object({
  clusterId: z.string(), view: z.enum(['leader', 'local']), node: z.string(), leader: z.string().nullable(), term: z.number(),
  commitIndex: z.number(), appliedIndex: z.number(), lastIndex: z.number(), members: z.array(memberSchema),
}).loose();
const transferAnswerSchema = z.object({ leader: z.string(), term: z.number() }).loose();

// The schema and the API's type must describe the same thing.
const _sameShape: z.infer<typeof clusterViewSchema> extends ClusterView ? true : never = true;
void _sameShape;

const membersRefreshMs = 1000;

export const clusterMembersHelp = `Usage: shoal cluster members [--watch] [--addr HOST:PORT] [--json]

Lists the members: name, id, role (voter or learner; * marks the leader), client API and peer
addresses, and health as the leader sees it.

Options:
  --watch            print the list again every second until Ctrl-C (follows other members'
                     APIs if the node at --addr stops answering)
${commonFlagsHelp}

With --json prints the members as a JSON array (with --watch, one array per line).
${clientExitCodes}`;

export const clusterAddHelp = `Usage: shoal cluster add --id ID --name NAME --peer HOST:PORT --api HOST:PORT [--addr HOST:PORT] [--json]

Adds a node to the cluster as a learner: it receives the log but does not vote, so a slow or
broken new node cannot cost the cluster its quorum. Prepare the node first: 'shoal init --data DIR
--name NAME --ca-from <a member's data dir>' prints its id; put 'join: {api: <any member's API>}'
(and no bootstrap list) in its shoal.yaml and start it with 'shoal serve' (docs/operations.md).
When it has caught up (LAG near 0 in 'shoal cluster status'), make it a voter with
'shoal cluster promote ID'.

Options:
  --id ID            the new node's id (printed by shoal init)
  --name NAME        its name
  --peer HOST:PORT   its peer transport address
  --api HOST:PORT    its client API address
${commonFlagsHelp}

With --json prints the cluster view after the change (as 'shoal cluster status --json').
${clientExitCodes} An id already in the cluster exits 1 (already_exists).`;

export const clusterPromoteHelp = `Usage: shoal cluster promote ID [--addr HOST:PORT] [--json]

Makes a learner a voter. Promote a node only when it has caught up (LAG near 0 in
'shoal cluster status'): a voter that cannot keep up counts against the quorum.

Options:
${commonFlagsHelp}

With --json prints the cluster view after the change.
${clientExitCodes} An unknown id exits 1 (not_found).`;

export const clusterRemoveHelp = `Usage: shoal cluster remove ID [--addr HOST:PORT] [--json]

Removes a member (voter or learner). From then on its certificate is refused by the other members.
Stop its process afterwards; to bring the machine back, initialize a new data directory and add it
again. Removing the leader moves leadership to another voter.

Options:
${commonFlagsHelp}

With --json prints the cluster view after the change.
${clientExitCodes} An unknown id exits 1 (not_found).`;

export const clusterTransferHelp = `Usage: shoal cluster transfer-leader [--to ID] [--addr HOST:PORT] [--json]

Moves leadership to another voter (--to, or the most up-to-date one) and prints the new leader.
Writes pause for the moment of the handover. Use it before stopping the leader's machine.

Options:
  --to ID            the voter to lead next (default: the most up-to-date voter)
${commonFlagsHelp}

With --json prints {leader, term, name}.
${clientExitCodes} A single-voter cluster exits 1 (no other voter).`;

const clusterGroup: Group = {
  name: 'cluster',
  about: 'Shows and changes the cluster: members, leadership.',
  subcommands: {
    status: { summary: 'leader, term, commit index and members (same as shoal status)', run: (argv) => statusCommand(argv, 'cluster status') },
    members: { summary: 'list members: name, id, role, addresses, health (--watch to follow)', run: membersCommand },
    add: { summary: 'add a node as a learner (promote it once it has caught up)', run: addCommand },
    promote: { summary: 'make a learner a voter', run: (argv) => changeCommand('promote', argv) },
    remove: { summary: 'remove a member', run: (argv) => changeCommand('remove', argv) },
    'transfer-leader': { summary: 'move leadership to another voter', run: transferCommand },
  },
};

export const clusterHelps: Record<string, string> = {
  members: clusterMembersHelp, add: clusterAddHelp, promote: clusterPromoteHelp, remove: clusterRemoveHelp, 'transfer-leader': clusterTransferHelp,
};

export function clusterCommand(argv: string[]): Promise<number> {
  return runGroup(clusterGroup, argv);
}

async function getView(addr: string): Promise<ClusterView> {
  return (await request(addr, 'GET', '/v1/cluster', clusterViewSchema, { timeoutMs: 5000 })).body;
}

function printMembers(v: ClusterView): void {
  table(['NAME', 'ID', 'ROLE', 'API', 'PEER', 'HEALTH'], v.members.map((m: MemberView) => [
    m.name, m.id, m.role + (m.id === v.leader ? '*' : ''), m.apiAddress, m.peerAddress, m.health,
  ]));
  if (v.leader === null) console.log('(no leader: roles and health are this node\'s local view)');
  else if (v.view === 'local') console.log('(leader unreachable: showing this node\'s local view)');
}

async function membersCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, watch: { type: 'boolean', default: false } }, 'cluster members');
  if (values.help) return help(clusterMembersHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const show = (v: ClusterView): void => {
    if (values.json) console.log(values.watch ? JSON.stringify(v.members) : JSON.stringify(v.members, null, 2));
    else printMembers(v);
  };
  if (!values.watch) {
    show(await getView(addr));
    return exitCodes.ok;
  }
  return watchMembers(addr, values.json, show);
}

/** Re-prints every second until Ctrl-C; a node that stops answering is replaced by another member. */
async function watchMembers(addr: string, json: boolean, show: (v: ClusterView) => void): Promise<number> {
  const stop = untilInterrupted();
  const addrs = [addr];
  let current = 0;
  const clear = process.stdout.isTTY && !json;
  try {
    while (!stop.signal.aborted) {
      const at = addrs[current] ?? addr;
      try {
        const v = await getView(at);
        for (const m of v.members) if (!addrs.includes(m.apiAddress)) addrs.push(m.apiAddress);
        if (clear) process.stdout.write('\x1b[2J\x1b[H');
        if (!json) console.log(`${new Date().toISOString()}  via ${at}  term ${v.term}  commit ${v.commitIndex}   (Ctrl-C to stop)`);
        show(v);
      } catch (err) {
        if (!isClientFailure(err)) throw err;
        current = (current + 1) % addrs.length;
        console.error(`shoal cluster members: ${at}: ${(err as ClientFailure).message}; trying ${addrs[current] ?? addr}`);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, membersRefreshMs);
        stop.signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
      });
    }
    return exitCodes.ok;
  } finally {
    stop.dispose();
  }
}

async function addCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, id: { type: 'string' }, name: { type: 'string' }, peer: { type: 'string' }, api: { type: 'string' },
  }, 'cluster add');
  if (values.help) return help(clusterAddHelp);
  const missing = (['id', 'name', 'peer', 'api'] as const).filter((k) => values[k] === undefined).map((k) => `--${k}`);
  if (missing.length > 0 || positionals.length > 0) {
    throw new UsageError(`${missing.length > 0 ? `missing ${missing.join(', ')}` : `unexpected argument '${positionals.join(' ')}'`}\nRun 'shoal cluster add --help' for usage.`);
  }
  const member = {
    id: values.id ?? '', name: values.name ?? '', peerAddress: checkHostPort(values.peer ?? '', '--peer'), apiAddress: checkHostPort(values.api ?? '', '--api'),
  };
  const addr = resolveAddr(values.addr);
  const { body } = await request(addr, 'POST', '/v1/cluster/members', clusterViewSchema, {
    body: member, retry: 'not-applied', onRetry: retryNotice('cluster add'),
  });
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
    return exitCodes.ok;
  }
  console.log(`added ${member.name} (${member.id}) as a learner: it receives the log but does not vote yet.
If it is not running, start it now, with 'join: {api: ${addr}}' and no bootstrap list in its config: shoal serve --config <its data dir>/shoal.yaml
When it has caught up (LAG near 0 in 'shoal cluster status'), make it a voter:
  shoal cluster promote ${member.id}${values.addr !== undefined ? ` --addr ${addr}` : ''}`);
  return exitCodes.ok;
}

async function changeCommand(kind: 'promote' | 'remove', argv: string[]): Promise<number> {
  const command = `cluster ${kind}`;
  const { values, positionals } = parse(argv, { ...commonFlags }, command);
  if (values.help) return help(kind === 'promote' ? clusterPromoteHelp : clusterRemoveHelp);
  const [id, ...extra] = positionals;
  if (id === undefined || extra.length > 0) throw new UsageError(`expected one member ID (see 'shoal cluster members')\nRun 'shoal ${command} --help' for usage.`);
  const addr = resolveAddr(values.addr);
  const path = `/v1/cluster/members/${encodeURIComponent(id)}`;
  const { body } = kind === 'promote'
    ? await request(addr, 'POST', `${path}/promote`, clusterViewSchema, { retry: 'not-applied', onRetry: retryNotice(command) })
    : await request(addr, 'DELETE', path, clusterViewSchema, { retry: 'not-applied', onRetry: retryNotice(command) });
  if (values.json) {
    console.log(JSON.stringify(body, null, 2));
    return exitCodes.ok;
  }
  const voters = body.members.filter((m) => m.role === 'voter').map((m) => m.name);
  if (kind === 'promote') {
    const m = body.members.find((x) => x.id === id);
    console.log(`promoted ${m?.name ?? id} (${id}) to voter; voters now: ${voters.join(', ')} (quorum ${Math.floor(voters.length / 2) + 1})`);
  } else {
    console.log(`removed ${id} from the cluster; its certificate is refused from now on. Stop its process, and initialize a new data directory before adding the machine again.
voters now: ${voters.join(', ')} (quorum ${Math.floor(voters.length / 2) + 1})`);
  }
  return exitCodes.ok;
}

async function transferCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, to: { type: 'string' } }, 'cluster transfer-leader');
  if (values.help) return help(clusterTransferHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'; use --to ID`);
  const addr = resolveAddr(values.addr);
  const { body } = await request(addr, 'POST', '/v1/cluster/leader', transferAnswerSchema, {
    body: values.to !== undefined ? { to: values.to } : {}, retry: 'not-applied', onRetry: retryNotice('cluster transfer-leader'), timeoutMs: 30_000,
  });
  // The name is a courtesy: the transfer is done whether or not this lookup answers.
  let name: string | undefined;
  try {
    name = (await getView(addr)).members.find((m) => m.id === body.leader)?.name;
  } catch {
    name = undefined;
  }
  if (values.json) console.log(JSON.stringify({ ...body, name: name ?? null }, null, 2));
  else console.log(`leadership moved: the leader is now ${name !== undefined ? `${name} (${body.leader})` : body.leader} at term ${body.term}`);
  return exitCodes.ok;
}
