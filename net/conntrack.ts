// Reading the connection tracking table (`conntrack -L`) and choosing which flows to end when a
// firewall permission goes (net/firewall.ts).
//
// Why one listing rather than one `conntrack -D FILTER` per permission: every filtered delete is
// a dump of the whole table in the kernel (all of its buckets, however few entries it holds), so
// 100 removed permissions cost 100 dumps, about 1.2 s of kernel time here even batched into one
// process. One listing, matched here, and one exact delete per flow that is actually open costs
// one dump plus one per live connection, which is usually none.
//
// `conntrack -L` prints one flow per line: the protocol name and number, the timeout, for TCP the
// state, then `key=value` fields, the original direction's `src= dst= sport= dport=` first and the
// reply direction's after them, with bracketed flags (`[UNREPLIED]`, `[ASSURED]`) between.

export interface FlowTuple {
  src: string;
  dst: string;
  sport: number;
  dport: number;
}

export interface Flow {
  protocol: 'tcp' | 'udp';
  original: FlowTuple;
  reply: FlowTuple;
}

const tupleKeys = ['src', 'dst', 'sport', 'dport'] as const;

function tupleOf(fields: ReadonlyMap<string, string>): FlowTuple | null {
  const [src, dst, sport, dport] = tupleKeys.map((k) => fields.get(k));
  if (src === undefined || dst === undefined || sport === undefined || dport === undefined) return null;
  const sp = Number(sport);
  const dp = Number(dport);
  if (!Number.isInteger(sp) || !Number.isInteger(dp)) return null;
  return { src, dst, sport: sp, dport: dp };
}

/** One line of `conntrack -L`, or null for a flow without ports (ICMP, ...) or a line that is not a flow. */
export function parseFlowLine(line: string): Flow | null {
  const tokens = line.trim().split(/\s+/);
  const protocol = tokens[0];
  if (protocol !== 'tcp' && protocol !== 'udp') return null;
  // The first src/dst/sport/dport are the original direction's; once all four are seen, the reply's begin.
  const directions: Map<string, string>[] = [new Map(), new Map()];
  for (const token of tokens.slice(1)) {
    const eq = token.indexOf('=');
    if (eq <= 0) continue;
    const key = token.slice(0, eq);
    if (!(tupleKeys as readonly string[]).includes(key)) continue;
    const dir = directions[0]?.has(key) === true ? directions[1] : directions[0];
    if (dir !== undefined && !dir.has(key)) dir.set(key, token.slice(eq + 1));
  }
  const original = tupleOf(directions[0] ?? new Map());
  const reply = tupleOf(directions[1] ?? new Map());
  return original === null || reply === null ? null : { protocol, original, reply };
}

export function parseFlows(text: string): Flow[] {
  const out: Flow[] = [];
  for (const line of text.split('\n')) {
    const flow = parseFlowLine(line);
    if (flow !== null) out.push(flow);
  }
  return out;
}

/** A permission a policy gave: from an address to a port of another. */
export interface PermitTuple {
  from: string;
  to: string;
  protocol: 'tcp' | 'udp';
  port: number;
}

/** A published port: reached through Docker's DNAT, so matched on the reply side, which is the task. */
export interface PublishedTuple {
  address: string;
  protocol: 'tcp' | 'udp';
  port: number;
}

/** The open flows that the removed permissions and published ports had allowed. */
export function flowsToEnd(flows: readonly Flow[], permits: readonly PermitTuple[], published: readonly PublishedTuple[]): Flow[] {
  const permitKeys = new Set(permits.map((p) => `${p.protocol} ${p.from} ${p.to} ${p.port}`));
  const publishedKeys = new Set(published.map((p) => `${p.protocol} ${p.address} ${p.port}`));
  return flows.filter((f) => permitKeys.has(`${f.protocol} ${f.original.src} ${f.original.dst} ${f.original.dport}`)
    || publishedKeys.has(`${f.protocol} ${f.reply.src} ${f.reply.sport}`));
}

/** `conntrack` arguments that delete exactly this flow (by its original tuple). */
export function deleteArgs(f: Flow): string[] {
  return ['-D', '-p', f.protocol, '-s', f.original.src, '-d', f.original.dst, '--sport', String(f.original.sport), '--dport', String(f.original.dport)];
}
