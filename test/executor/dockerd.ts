// Makes sure a Docker daemon answers on the local socket, starting `dockerd` when none does.
// Tests that need Docker call ensureDockerd() first; .ci/run runs this file before `npm test`
// (`npx tsx test/executor/dockerd.ts`), so both start the daemon the same way.
//
// The daemon is left running afterwards: it is shared by every test file, and stopping it would
// kill every container on the machine. Two callers racing to start it are fine: the loser's
// dockerd exits (the pid file is taken) and both wait for the same socket to answer.

import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export const defaultSocketPath = '/var/run/docker.sock';
/** Where a dockerd we start writes its log. */
export const dockerdLogPath = path.join(os.tmpdir(), 'shoal-dockerd.log');

const pingTimeoutMs = 2_000;
const startTimeoutMs = 60_000;
const pollIntervalMs = 250;

/** One GET /_ping over the socket; true when Docker answers OK. Never throws. */
export function pingDocker(socketPath = defaultSocketPath, timeoutMs = pingTimeoutMs): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ socketPath, path: '/_ping', timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', () => resolve(false));
  });
}

function startDockerd(socketPath: string): void {
  if (spawnSync('dockerd', ['--version']).status !== 0) {
    throw new Error("Docker is not running and 'dockerd' is not installed: apt-get install -y --no-install-recommends docker.io (.ci/run does this)");
  }
  if (process.getuid?.() !== 0) throw new Error('Docker is not running and starting dockerd needs root');
  const log = openSync(dockerdLogPath, 'a');
  try {
    const child = spawn('dockerd', ['--host', `unix://${socketPath}`], { detached: true, stdio: ['ignore', log, log] });
    child.on('error', () => undefined);
    child.unref();
  } finally {
    closeSync(log);
  }
}

/**
 * Resolves once Docker answers on `socketPath`, starting dockerd first when nothing answers.
 * Returns whether this call started it. Rejects, saying where the daemon's log is, when it
 * does not come up in time.
 */
export async function ensureDockerd(socketPath = defaultSocketPath): Promise<{ started: boolean }> {
  if (await pingDocker(socketPath)) return { started: false };
  startDockerd(socketPath);
  const deadline = Date.now() + startTimeoutMs;
  while (Date.now() < deadline) {
    if (await pingDocker(socketPath)) return { started: true };
    await new Promise((r) => setTimeout(r, pollIntervalMs));
  }
  const hint = existsSync(dockerdLogPath) ? `; its log is ${dockerdLogPath}` : '';
  throw new Error(`dockerd did not answer on ${socketPath} within ${startTimeoutMs} ms${hint}`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  ensureDockerd().then(
    ({ started }) => { console.log(started ? `== started dockerd (log: ${dockerdLogPath})` : '== dockerd is running'); },
    (err: unknown) => { console.error(String(err instanceof Error ? err.message : err)); process.exit(1); },
  );
}
