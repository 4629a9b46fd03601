// shoal cluster: membership and leadership. Status and member listing read GET /v1/cluster;
// changes go to the leader (any node forwards them) as Raft configuration changes. Members are
// named by name or id alike: the API resolves either (an exact id first, then a unique name).

import { z } from 'zod';
import { exitCodes, parse, UsageError } from './args.ts';
import { checkHostPort, isClientFailure, request, resolveAddr, retryNotice, type ClientFailure } from './client.ts';
import { byName, clusterViewSchema, getView, label, table, type MemberInfo, type View } from './cluster-view.ts';
import { commonFlags, help } from './doc-common.ts';
import { clientExitCodes, commonFlagsHelp, groupHelp, runGroup, type Group } from './group.ts';
import { statusCommand, statusHelp } from './status.ts';
import { untilInterrupted } from './watch-stream.ts';
import { autolockCommand, clusterAutolockHelp } from './keyring.ts';

const memberRecordSchema = z.object({ id: z.string(), name: z.string() }).loose();
/** A membership change answers with the view after it and the member it concerned. */
const changeAnswerSchema = clusterViewSchema.extend({ member: memberRecordSchema.optional(), warning: z.string().optional() });
const transferAnswerSchema = z.object({ leader: z.string(), term: z.number(), name: z.string().nullable().optional() }).loose();

const membersRefreshMs = 1000;

export const clusterMembersHelp = `Usage: shoal cluster members [--watch] [--addr HOST:PORT] [--json]

Lists the members, sorted by name: name, id, role (voter or learner; * marks the leader), client
API and peer addresses, software version, and health as the leader sees it.

Options:
  --watch            print the list again every second until Ctrl-C (follows other members'
                     APIs if the node at --addr stops answering)
${commonFlagsHelp}

With --json prints the members as a JSON array (with --watch, one array per line).
${clientExitCodes}`;

export const clusterAddHelp = `Usage: shoal cluster add --id ID --name NAME --peer HOST:PORT --api HOST:PORT [--force] [--addr HOST:PORT] [--json]

Adds a node to the cluster as a learner: it receives the log but does not vote, so a slow or
broken new node cannot cost the cluster its quorum. Prepare the node first: 'shoal init --data DIR
--name NAME --ca-from <a member's data dir>' prints its id; put 'join: {api: <any member's API>}'
(and no bootstrap list) in its shoal.yaml and start it with 'shoal serve' (docs/operations.md).
Before adding it, the leader asks the node's API (--api) who it is, and refuses a node that does
not answer, answers with another id, or belongs to another cluster (another CA). When it has
caught up (LAG near 0 in 'shoal cluster status'), make it a voter with 'shoal cluster promote NAME'.

Options:
  --id ID            the new node's id (printed by shoal init)
  --name NAME        its name (unique in the cluster)
  --peer HOST:PORT   its peer transport address
  --api HOST:PORT    its client API address
  --force            add it even if its API does not answer or says it is another node or
                     cluster (it will not be able to join until that is fixed)
${commonFlagsHelp}

With --json prints the cluster view after the change (as 'shoal cluster status --json'), with
the new member as "member".
${clientExitCodes} An id or name already in the cluster exits 1 (already_exists); a node that
is not running or is of another cluster exits 1 (member_not_ready).`;

export const clusterPromoteHelp = `Usage: shoal cluster promote NAME|ID [--force] [--addr HOST:PORT] [--json]

Makes a learner a voter. The leader refuses (member_not_ready) a learner it has not heard from
lately, or that is more than 1000 entries behind: a voter that cannot keep up counts against the
quorum, one more failure away from losing it (as etcd refuses). Wait until LAG is near 0 in
'shoal cluster status', or override with --force.

Options:
  --force            promote it even if it is unreachable or behind
${commonFlagsHelp}

With --json prints the cluster view after the change, with the member as "member".
${clientExitCodes} An unknown member exits 1 (not_found); a name shared by several members
exits 1 (ambiguous_name: use the id); a learner not ready exits 1 (member_not_ready).`;

export const clusterRemoveHelp = `Usage: shoal cluster remove NAME|ID [--addr HOST:PORT] [--json]

Removes a member (voter or learner). From then on its certificate is refused by the other members.
Stop its process afterwards; to bring the machine back, initialize a new data directory and add it
again. Removing the leader moves leadership to another voter.

Options:
${commonFlagsHelp}

With --json prints the cluster view after the change, with the removed member as "member".
${clientExitCodes} An unknown member exits 1 (not_found); an ambiguous name exits 1 (ambiguous_name).`;

export const clusterTransferHelp = `Usage: shoal cluster transfer-leader [--to NAME|ID] [--addr HOST:PORT] [--json]

Moves leadership to another voter (--to, or the most up-to-date one) and prints the new leader.
Writes pause for the moment of the handover. Use it before stopping the leader's machine.

Options:
  --to NAME|ID       the voter to lead next (default: the most up-to-date voter)
${commonFlagsHelp}

With --json prints {leader, term, name}.
${clientExitCodes} A single-voter cluster exits 1 (no other voter).`;

export const clusterGroup: Group = {
  name: 'cluster',
  about: 'Shows and changes the cluster: members, leadership. Name members by name or by id.',
  subcommands: {
    status: { summary: 'leader, term, commit index and members (same as shoal status)', help: statusHelp('cluster status'), run: (argv) => statusCommand(argv, 'cluster status') },
    members: { summary: 'list members: name, id, role, addresses, health (--watch to follow)', help: clusterMembersHelp, run: membersCommand },
    add: { summary: 'add a node as a learner (promote it once it has caught up)', help: clusterAddHelp, run: addCommand },
    promote: { summary: 'make a learner a voter (refused until it has caught up, unless --force)', help: clusterPromoteHelp, run: promoteCommand },
    remove: { summary: 'remove a member', help: clusterRemoveHelp, run: removeCommand },
    'transfer-leader': { summary: 'move leadership to another voter', help: clusterTransferHelp, run: transferCommand },
    autolock: { summary: 'seal the voters\' keys on disk with an unlock key (on, off, status; admin)', help: clusterAutolockHelp, run: autolockCommand },
  },
};

export const clusterHelps: Record<string, string> = {
  members: clusterMembersHelp, add: clusterAddHelp, promote: clusterPromoteHelp, remove: clusterRemoveHelp, 'transfer-leader': clusterTransferHelp,
  autolock: clusterAutolockHelp,
};

export const clusterGroupHelp = groupHelp(clusterGroup);

export function clusterCommand(argv: string[]): Promise<number> {
  return runGroup(clusterGroup, argv);
}

function printMembers(v: View): void {
  table(['NAME', 'ID', 'ROLE', 'API', 'PEER', 'VERSION', 'HEALTH'], byName(v.members).map((m: MemberInfo) => [
    m.name, m.id, m.role + (m.id === v.leader ? '*' : ''), m.apiAddress, m.peerAddress, m.softwareVersion ?? '-', m.health,
  ]));
  if (v.leader === null) console.log('(no leader: roles and health are this node\'s local view)');
  else if (v.view === 'local') console.log('(leader unreachable: showing this node\'s local view)');
}

async function membersCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, watch: { type: 'boolean', default: false } }, clusterMembersHelp);
  if (values.help) return help(clusterMembersHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const addr = resolveAddr(values.addr);
  const show = (v: View): void => {
    const members = byName(v.members);
    if (values.json) console.log(values.watch ? JSON.stringify(members) : JSON.stringify(members, null, 2));
    else printMembers(v);
  };
  if (!values.watch) {
    show(await getView(addr));
    return exitCodes.ok;
  }
  return watchMembers(addr, values.json, show);
}

/** Re-prints every second until Ctrl-C; a node that stops answering is replaced by another member. */
async function watchMembers(addr: string, json: boolean, show: (v: View) => void): Promise<number> {
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

const quorumLine = (v: View): string => {
  const voters = byName(v.members).filter((m) => m.role === 'voter').map((m) => m.name);
  return `voters now: ${voters.join(', ')} (quorum ${Math.floor(voters.length / 2) + 1})`;
};

async function addCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, {
    ...commonFlags, id: { type: 'string' }, name: { type: 'string' }, peer: { type: 'string' }, api: { type: 'string' },
    force: { type: 'boolean', default: false },
  }, clusterAddHelp);
  if (values.help) return help(clusterAddHelp);
  const missing = (['id', 'name', 'peer', 'api'] as const).filter((k) => values[k] === undefined).map((k) => `--${k}`);
  if (missing.length > 0) throw new UsageError(`missing ${missing.join(', ')}`);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`);
  const member = {
    id: values.id ?? '', name: values.name ?? '', peerAddress: checkHostPort(values.peer ?? '', '--peer'), apiAddress: checkHostPort(values.api ?? '', '--api'),
  };
  const addr = resolveAddr(values.addr);
  const { body } = await request(addr, 'POST', '/v1/cluster/members', changeAnswerSchema, {
    body: member, query: { force: values.force ? 'true' : undefined }, retry: 'not-applied', onRetry: retryNotice('cluster add'),
  });
  if (values.json) return printJson(body);
  console.log(`added ${label(member)} as a learner: it receives the log but does not vote yet.
If it is not running, start it now, with 'join: {api: ${addr}}' and no bootstrap list in its config: shoal serve --config <its data dir>/shoal.yaml
When it has caught up (LAG near 0 in 'shoal cluster status'), make it a voter:
  shoal cluster promote ${member.name}${values.addr !== undefined ? ` --addr ${addr}` : ''}`);
  return exitCodes.ok;
}

function memberRef(positionals: string[]): string {
  const [ref, ...extra] = positionals;
  if (ref === undefined) throw new UsageError("missing the member's NAME or ID (see 'shoal cluster members')");
  if (extra.length > 0) throw new UsageError(`expected one member, got '${positionals.join(' ')}'`);
  return ref;
}

const memberPath = (ref: string): string => `/v1/cluster/members/${encodeURIComponent(ref)}`;

function printJson(body: unknown): number {
  console.log(JSON.stringify(body, null, 2));
  return exitCodes.ok;
}

async function promoteCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, force: { type: 'boolean', default: false } }, clusterPromoteHelp);
  if (values.help) return help(clusterPromoteHelp);
  const ref = memberRef(positionals);
  const { body } = await request(resolveAddr(values.addr), 'POST', `${memberPath(ref)}/promote`, changeAnswerSchema, {
    query: { force: values.force ? 'true' : undefined }, retry: 'not-applied', onRetry: retryNotice('cluster promote'),
  });
  if (values.json) return printJson(body);
  console.log(`promoted ${body.member !== undefined ? label(body.member) : ref} to voter; ${quorumLine(body)}`);
  return exitCodes.ok;
}

async function removeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags }, clusterRemoveHelp);
  if (values.help) return help(clusterRemoveHelp);
  const ref = memberRef(positionals);
  const { body } = await request(resolveAddr(values.addr), 'DELETE', memberPath(ref), changeAnswerSchema, { retry: 'not-applied', onRetry: retryNotice('cluster remove') });
  if (body.warning !== undefined) console.error(`warning: ${body.warning}`);
  if (values.json) return printJson(body);
  console.log(`removed ${body.member !== undefined ? label(body.member) : ref} from the cluster; its certificate is refused from now on. Stop its process, and initialize a new data directory before adding the machine again.
${quorumLine(body)}`);
  return exitCodes.ok;
}

async function transferCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { ...commonFlags, to: { type: 'string' } }, clusterTransferHelp);
  if (values.help) return help(clusterTransferHelp);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'; use --to NAME`);
  const addr = resolveAddr(values.addr);
  const { body } = await request(addr, 'POST', '/v1/cluster/leader', transferAnswerSchema, {
    body: values.to !== undefined ? { to: values.to } : {}, retry: 'not-applied', onRetry: retryNotice('cluster transfer-leader'), timeoutMs: 30_000,
  });
  const name = body.name ?? null;
  if (values.json) console.log(JSON.stringify({ leader: body.leader, term: body.term, name }, null, 2));
  else console.log(`leadership moved: the leader is now ${name !== null ? label({ id: body.leader, name }) : body.leader} at term ${body.term}`);
  return exitCodes.ok;
}
