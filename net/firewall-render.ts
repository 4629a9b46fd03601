// The whole nftables state shoal owns on a node, as the text `nft -f` takes: one table,
// `inet shoal`, replaced in one transaction (its first lines create the table if missing and
// delete it, then define it whole: the kernel applies all of it or none of it, so there is never
// a moment with half a table or none).
//
// A pure function of the committed state (the permits, firewall-permits.ts) and of where it came
// from: the term and revision are written in the table's comment (what `nft list table inet
// shoal` shows a person) and in the comment of the one rule of the chain `applied` (what
// firewall.ts reads back as JSON to know what is in force).
//
// Rules (docs/network.md, Firewall):
// - input: the host's management ports (SSH, the API, the Raft peer port) are accepted first,
//   before any other rule, whatever the policy says; an internal network reaches only DNS on
//   the host. Every other input is left alone (policy accept).
// - forward: traffic inside one network passes; between networks, or from outside into a
//   network, only what a permit or a published port names; an internal network sends nothing
//   out. Everything not to or from a shoal network is left alone (policy accept). Every accept
//   sets the mark bit `acceptMark`, which the one rule shoal keeps in Docker's DOCKER-USER chain
//   accepts (an accept here does not override Docker's FORWARD policy DROP). Connections the
//   routing mesh forwards (ct mark ingressCtMark) pass: its own table applied the publish rules
//   to them before its DNAT (net/ingress-render.ts).

import { ingressCtMark } from './ingress-marks.ts';
import { firewallPermits, type FirewallNetwork, type PermitInput, type Permit, type Published } from './firewall-permits.ts';
import { compareText } from '../src/base/order.ts';

export interface FirewallRenderInput extends PermitInput {
  /** The leader term and store revision of the committed state rendered. */
  term: number;
  revision: number;
  /** TCP ports of the host never filtered: SSH, the client API, the Raft peer transport. */
  managementPorts: readonly number[];
}

export interface RenderedFirewall {
  text: string;
  permits: Permit[];
  published: Published[];
}

export const tableFamily = 'inet';
export const tableName = 'shoal';
/** The packet mark bit shoal's accepts set, for Docker's DOCKER-USER chain to accept in turn. */
export const acceptMark = 0x0010_0000;
/** SSH: never filtered, whatever the config says of other ports. */
export const sshPort = 22;

const markAccept = `meta mark set meta mark | ${hex(acceptMark)} accept`;

function hex(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`;
}

/** The text of the `applied` rule's comment; parseAppliedComment reads it back. */
export function appliedComment(nodeId: string, term: number, revision: number): string {
  return `shoal node=${safe(nodeId)} term=${term} revision=${revision}`;
}

export function parseAppliedComment(comment: string): { nodeId: string; term: number; revision: number } | null {
  const m = /^shoal node=(\S+) term=(\d+) revision=(\d+)$/.exec(comment);
  return m === null ? null : { nodeId: m[1] ?? '', term: Number(m[2]), revision: Number(m[3]) };
}

/** Node ids are ours, but a comment is quoted text: nothing that could end it. */
function safe(text: string): string {
  return text.replace(/[^A-Za-z0-9._:-]/g, '_');
}

function set(name: string, type: string, elements: readonly string[], flags = ''): string[] {
  const lines = [`  set ${name} {`, `    type ${type}`];
  if (flags !== '') lines.push(`    flags ${flags}`);
  if (elements.length > 0) lines.push(`    elements = {\n${elements.map((e) => `      ${e}`).join(',\n')}\n    }`);
  lines.push('  }');
  return lines;
}

export function renderFirewall(input: FirewallRenderInput): RenderedFirewall {
  const { permits, published } = firewallPermits(input);
  const management = [...new Set([sshPort, ...input.managementPorts])].sort((a, b) => a - b);
  const networks = [...input.networks].sort((a, b) => compareText(a.name, b.name));
  const internal = networks.filter((n) => n.internal);
  const comment = appliedComment(input.node.id, input.term, input.revision);
  const lines = [
    `table ${tableFamily} ${tableName}`,
    `delete table ${tableFamily} ${tableName}`,
    `table ${tableFamily} ${tableName} {`,
    `  comment "${comment}"`,
    ...set('subnets', 'ipv4_addr', networks.map((n) => n.subnet), 'interval'),
    ...set('internal', 'ipv4_addr', internal.map((n) => n.subnet), 'interval'),
    ...set('permits', 'ipv4_addr . ipv4_addr . inet_proto . inet_service', permits.map((p) => `${p.from} . ${p.to} . ${p.protocol} . ${p.port}`)),
    ...set('published', 'ipv4_addr . inet_proto . inet_service', published.map((p) => `${p.address} . ${p.protocol} . ${p.port}`)),
    '  chain applied {',
    `    counter comment "${comment}"`,
    '  }',
    '  chain input {',
    '    type filter hook input priority filter - 10; policy accept;',
    `    tcp dport { ${management.join(', ')} } accept comment "management: never filtered"`,
    '    ct state established,related accept',
    '    ip saddr @internal meta l4proto { tcp, udp } th dport 53 accept comment "internal networks: DNS on the node"',
    '    ip saddr @internal drop comment "internal networks reach nothing else on the host"',
    '  }',
    '  chain forward {',
    '    type filter hook forward priority filter - 10; policy accept;',
    `    ct state established,related ${markAccept}`,
    `    ct mark & ${hex(ingressCtMark)} == ${hex(ingressCtMark)} ${markAccept} comment "routing mesh: its table decided (publish rules)"`,
    ...networks.map((n) => `    ip saddr ${n.subnet} ip daddr ${n.subnet} ${markAccept} comment "inside network ${n.name}"`),
    `    ip saddr . ip daddr . meta l4proto . th dport @permits ${markAccept} comment "policy allow rules"`,
    `    ip saddr != @subnets ip daddr . meta l4proto . th dport @published ${markAccept} comment "policy publish rules"`,
    '    ip daddr @subnets drop comment "networks are isolated: nothing else comes in"',
    '    ip saddr @internal drop comment "internal networks send nothing out"',
    `    ip saddr @subnets ${markAccept} comment "networks reach the outside"`,
    '  }',
    '}',
  ];
  return { text: `${lines.join('\n')}\n`, permits, published };
}

export type { FirewallNetwork };
