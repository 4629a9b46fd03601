// Who may import whom: the folder graph of the process (docs/architecture.md, "The map"). Each
// folder lists the folders it may import; anything else is a lint error (scripts/eslint-layers.mjs)
// and the graph itself must stay acyclic (test/architecture/layers.test.ts checks both this table
// and the imports as they are). Folders are src/<name> (a top-level file of src/ counts as its own
// folder), fsm, transport and net; tests, benchmarks and scripts are outside the graph.

const leaves = ['src/errors.ts', 'src/log.ts', 'src/version.ts', 'src/base'];

/** @type {Record<string, string[]>} */
export const layers = {
  // Neutral leaves and the pure consensus core.
  'src/errors.ts': [],
  'src/log.ts': [],
  'src/version.ts': [],
  'src/base': ['src/errors.ts'],
  'src/raft': ['src/base'],
  // Durable storage and the document store.
  'src/storage': [...leaves, 'src/raft'],
  fsm: [...leaves],
  // The resource vocabulary everything above shares, and the node's narrow ports.
  'src/resources': [...leaves, 'src/raft', 'fsm'],
  'src/ports': [...leaves, 'src/raft', 'src/resources'],
  // Certificates and tokens; the peer transport (which checks certificates).
  'src/security': [...leaves, 'src/raft', 'fsm', 'src/ports'],
  transport: [...leaves, 'src/raft', 'src/security'],
  // The leader's loops, the node agent and the node's network agents: ports, never the node.
  'src/control': [...leaves, 'fsm', 'src/resources', 'src/ports'],
  'src/executor': [...leaves, 'fsm', 'src/resources', 'src/ports'],
  net: [...leaves, 'fsm', 'src/resources', 'src/ports', 'src/executor'],
  // The node: the driver and its subsystems (events, metrics, drills, upgrades, recovery).
  'src/node': [...leaves, 'src/raft', 'src/storage', 'fsm', 'src/resources', 'src/ports', 'src/security', 'transport', 'src/control'],
  // The client API, the composition root that builds a node, then the user's tools.
  'src/api': [...leaves, 'src/raft', 'fsm', 'src/resources', 'src/ports', 'src/security', 'transport', 'src/control', 'src/executor', 'src/node'],
  'src/server': [...leaves, 'src/raft', 'src/storage', 'fsm', 'src/resources', 'src/ports', 'src/security', 'transport', 'src/control', 'src/executor', 'net', 'src/node', 'src/api'],
  'src/cli': [...leaves, 'src/raft', 'src/storage', 'fsm', 'src/resources', 'src/ports', 'src/security', 'transport', 'src/control', 'src/executor', 'net', 'src/node', 'src/api', 'src/server'],
  'src/console': ['src/api', 'src/node', 'src/resources'],
};

/** The folder of a path relative to the repository root, or null outside the graph. */
export function folderOf(rel) {
  const parts = rel.split(/[\\/]/);
  if (parts[0] === 'src') return parts.length === 2 ? `src/${parts[1]}` : `src/${parts[1]}`;
  if (['fsm', 'transport', 'net'].includes(parts[0])) return parts[0];
  return null;
}
