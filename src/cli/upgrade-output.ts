// What `shoal upgrade` prints: with --json one event object per line as the walk goes (plan,
// step, done), else one line per step, prefixed with the node and its place in the walk.

export type UpgradeEvent =
  | {
    event: 'plan'; action: 'upgrade' | 'rollback'; release?: string; version?: string; sha256?: string;
    nodes: { node: string; id: string; action: 'upgrade' | 'rollback' | 'skip'; to?: string; why?: string }[];
  }
  | { event: 'step'; node: string; id: string; index: number; total: number; step: 'sending' | 'sent' | 'activating' | 'waiting' | 'back' | 'skipped'; message: string; ms?: number }
  | { event: 'done'; featureLevel: number | null; versions: Record<string, string | null>; message: string };

export function printer(json: boolean, out: (line: string) => void = (l) => console.log(l)): (e: UpgradeEvent) => void {
  if (json) return (e) => out(JSON.stringify(e));
  return (e) => {
    switch (e.event) {
      case 'plan': {
        const order = e.nodes.map((n) => `${n.node}${n.action === 'skip' ? ' (skip)' : ''}`).join(' -> ');
        out(e.action === 'upgrade' ? `upgrade to ${e.release ?? '?'} (version ${e.version ?? '?'}): ${order}` : `rollback to each node's previous release: ${order}`);
        return;
      }
      case 'step':
        out(`[${e.index}/${e.total}] ${e.node}: ${e.message}`);
        return;
      case 'done':
        out(e.message);
    }
  };
}
