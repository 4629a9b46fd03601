// The systemd unit `shoal install` writes for one node (docs/operations.md, "Running as a
// service"). A pure function of its inputs, so a test can check every line and systemd's own
// `systemd-analyze verify` can check the file.

import { noRestartExitCodes } from './args.ts';

export interface UnitInput {
  nodeName: string;
  nodeId: string;
  /** Absolute paths. */
  dataDir: string;
  configFile: string;
  nodeBinary: string;
  shoalEntry: string;
  /** The node's environment (src/cli/node-environment.ts): NODE_OPTIONS, the allocator's LD_PRELOAD and MALLOC_CONF. */
  environment: Record<string, string>;
  /** How long a graceful stop may take before systemd kills the node (seconds). */
  stopTimeoutSeconds: number;
  /** docs/operations.md of the installed package. */
  docsFile: string;
}

/** shoal-<node name>.service: one unit per node, so two nodes on one machine do not collide. */
export function unitName(nodeName: string): string {
  return `shoal-${nodeName}.service`;
}

/** `%` starts a specifier in every setting: written `%%`. */
const escapeSpecifiers = (v: string): string => v.replaceAll('%', '%%');

/**
 * A word of ExecStart= or Environment=: `%` and `$` escaped (specifiers, variables), and a word
 * with spaces or quotes written in double quotes with escapes.
 */
function quote(word: string): string {
  const w = escapeSpecifiers(word).replaceAll('$', () => '$$');
  return /^[A-Za-z0-9_@%$+=:,./-]+$/.test(w) ? w : `"${w.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

export function renderUnit(u: UnitInput): string {
  const exec = [u.nodeBinary, u.shoalEntry, 'serve', '--config', u.configFile].map(quote).join(' ');
  return [
    '# Written by `shoal install`; `shoal uninstall` removes it. docs/operations.md, "Running as a service".',
    '[Unit]',
    `Description=shoal node ${u.nodeName} (${u.nodeId})`,
    `Documentation=file://${u.docsFile}`,
    // The API and peer addresses must exist before the node binds them; Docker, when present,
    // before the agent adopts its containers (not required: a node may run without Docker).
    'After=network-online.target docker.service',
    'Wants=network-online.target',
    '',
    '[Service]',
    'Type=simple',
    `ExecStart=${exec}`,
    // A path setting takes the rest of the line as it is: no quotes.
    `WorkingDirectory=${escapeSpecifiers(u.dataDir)}`,
    ...Object.entries(u.environment).map(([name, value]) => `Environment=${quote(`${name}=${value}`)}`),
    // A crash (exit 1) restarts; the causes a restart cannot cure do not (docs/operations.md, "Exit codes").
    'Restart=on-failure',
    'RestartSec=2s',
    `RestartPreventExitStatus=${noRestartExitCodes.join(' ')}`,
    // SIGTERM is the graceful stop: leadership handed over, the API drained, then exit 0.
    'KillSignal=SIGTERM',
    'KillMode=mixed',
    `TimeoutStopSec=${u.stopTimeoutSeconds}s`,
    'LimitNOFILE=65536',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}
