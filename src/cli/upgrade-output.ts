// What `shoal upgrade` prints: with --json one event object per line as the walk goes (plan,
// step, done); else one line per step, prefixed with the node and its place in the walk. On a
// terminal, a node's steps rewrite one line (its progress line), which stays once the node is
// done, so the screen ends with a line per node.

export type UpgradeEvent =
  | {
    event: 'plan'; action: 'upgrade' | 'rollback'; release?: string; version?: string; sha256?: string;
    nodes: { node: string; id: string; action: 'upgrade' | 'rollback' | 'skip'; to?: string; why?: string }[];
  }
  | { event: 'step'; node: string; id: string; index: number; total: number; step: 'sending' | 'sent' | 'activating' | 'waiting' | 'back' | 'skipped'; message: string; ms?: number }
  | { event: 'done'; featureLevel: number | null; versions: Record<string, string | null>; message: string };

/** Steps after which a node's line is final (on a terminal the next step starts a new line). */
const lineEnds = new Set(['sent', 'back', 'skipped']);

function text(e: UpgradeEvent): string {
  switch (e.event) {
    case 'plan': {
      const order = e.nodes.map((n) => `${n.node}${n.action === 'skip' ? ' (skip)' : ''}`).join(' -> ');
      return e.action === 'upgrade' ? `upgrade to ${e.release ?? '?'} (version ${e.version ?? '?'}): ${order}` : `rollback to each node's previous release: ${order}`;
    }
    case 'step':
      return `[${e.index}/${e.total}] ${e.node}: ${e.message}`;
    case 'done':
      return e.message;
  }
}

/** Lines as they go (a log, a pipe, --json). */
export function printer(json: boolean, out: (line: string) => void = (l) => console.log(l)): (e: UpgradeEvent) => void {
  return json ? (e) => out(JSON.stringify(e)) : (e) => out(text(e));
}

/** On a terminal: one line per node, rewritten in place (carriage return, erase line) until the node's step ends it. */
export function terminalPrinter(write: (s: string) => void = (s) => process.stdout.write(s)): (e: UpgradeEvent) => void {
  let open = false;
  return (e) => {
    const line = text(e);
    write(`${open ? '\r\x1b[K' : ''}${line}`);
    open = e.event === 'step' && !lineEnds.has(e.step);
    if (!open) write('\n');
  };
}
