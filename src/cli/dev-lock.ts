// Finding a running `shoal dev`, so that a second one refuses to start instead of fighting the
// first over its data and ports (two supervisors on one data directory crashed nodes with "log
// is locked", and printed the first cluster's leader as their own).
//
//   <data>/dev.lock     the running supervisor: {pid, dataDir, socket, basePort, nodes, startedAt};
//                       created exclusively, removed when it stops
//   <data>/dev.sock     its control socket (src/cli/dev-control.ts)
//   $TMPDIR/shoal-dev/<pid>.json   the same record, so that a dev cluster started from another
//                       directory can be named when its ports are found taken
//
// A lock whose supervisor is gone (its pid is dead, or its socket does not answer: a killed
// supervisor, or a pid reused by another program) is stale and taken over.

import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { exitCodes } from './args.ts';
import { CliFailure } from './client.ts';
import { processAlive } from '../base/process-alive.ts';

const lockSchema = z.object({
  pid: z.number().int(), dataDir: z.string(), socket: z.string(), basePort: z.number().int(), nodes: z.number().int(), startedAt: z.string(),
}).loose();
export type DevLock = z.infer<typeof lockSchema>;

/** Unix socket paths longer than this do not fit in sockaddr_un (108 bytes on Linux, 104 on macOS). */
const socketPathMax = 100;
const probeTimeoutMs = 500;

/** Where `shoal dev` keeps its data without --data: relative to the directory it runs in. */
export const devDataDefault = '.shoal-dev';

export const lockFile = (dataDir: string): string => path.join(dataDir, 'dev.lock');
const registryDir = (): string => path.join(os.tmpdir(), 'shoal-dev');

/** The control socket: in the data directory, or in $TMPDIR when that path would be too long. */
export function socketPath(dataDir: string): string {
  const inData = path.join(path.resolve(dataDir), 'dev.sock');
  if (inData.length <= socketPathMax) return inData;
  return path.join(os.tmpdir(), `shoal-dev-${createHash('sha256').update(inData).digest('hex').slice(0, 16)}.sock`);
}

function readLock(file: string): DevLock | undefined {
  try {
    const parsed = lockSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}


function socketAnswers(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = createConnection(socket);
    const done = (ok: boolean): void => {
      c.destroy();
      resolve(ok);
    };
    c.setTimeout(probeTimeoutMs, () => done(false));
    c.once('connect', () => done(true));
    c.once('error', () => done(false));
  });
}

/** The supervisor running from `dataDir`, if one is alive. */
export async function runningDev(dataDir: string): Promise<DevLock | undefined> {
  const held = readLock(lockFile(dataDir));
  if (held === undefined || !processAlive(held.pid)) return undefined;
  return (await socketAnswers(held.socket)) ? held : undefined;
}

export function describeDev(l: DevLock): string {
  const apis = Array.from({ length: l.nodes }, (_, i) => `:${l.basePort + i}`).join(', ');
  return `from ${l.dataDir} (supervisor pid ${l.pid}, since ${l.startedAt}; APIs on 127.0.0.1${apis})`;
}

/** A word as a POSIX shell reads it back: as it is when it is plain, else single-quoted. */
function shellWord(s: string): string {
  return /^[A-Za-z0-9._/:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * What `shoal dev restart|stop` must be given to reach the dev cluster of `dataDir` from this
 * directory: '' for the default (.shoal-dev here), else ` --data DIR` (absolute, shell-quoted).
 * The ports need no flag: those commands find the supervisor by its data directory.
 */
export function dataFlag(dataDir: string): string {
  const dir = path.resolve(dataDir);
  return dir === path.resolve(devDataDefault) ? '' : ` --data ${shellWord(dir)}`;
}

export function stopAdvice(l: DevLock): string {
  return `stop it with Ctrl-C in its terminal, or: npx shoal dev stop${dataFlag(l.dataDir)}`;
}

/**
 * Takes the lock of `dataDir` for this process, or refuses because a dev cluster runs from it.
 * Returns the function that releases it (and the registry record).
 */
export async function acquireDevLock(lock: DevLock): Promise<() => void> {
  const file = lockFile(lock.dataDir);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, `${JSON.stringify(lock, null, 2)}\n`);
      closeSync(fd);
      const record = writeRegistry(lock);
      return () => {
        rmSync(file, { force: true });
        if (record !== undefined) rmSync(record, { force: true });
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const running = await runningDev(lock.dataDir);
      if (running !== undefined) {
        throw new CliFailure(`a dev cluster is already running ${describeDev(running)}.
  use it (npx shoal status), restart one of its nodes (npx shoal dev restart n2${dataFlag(running.dataDir)}), or ${stopAdvice(running)}`, exitCodes.failed, 'already_running');
      }
      rmSync(file, { force: true });
    }
  }
  throw new CliFailure(`cannot take ${file}: another shoal dev is starting from ${lock.dataDir} at this moment`, exitCodes.failed, 'already_running');
}

function writeRegistry(lock: DevLock): string | undefined {
  try {
    mkdirSync(registryDir(), { recursive: true });
    const file = path.join(registryDir(), `${lock.pid}.json`);
    const fd = openSync(file, 'w', 0o600);
    writeSync(fd, JSON.stringify(lock));
    closeSync(fd);
    return file;
  } catch {
    // Only a nicer message depends on it.
    return undefined;
  }
}

/** The live dev clusters this machine's registry knows, whichever directory they run from. */
function registered(): DevLock[] {
  if (!existsSync(registryDir())) return [];
  const found: DevLock[] = [];
  for (const f of readdirSync(registryDir())) {
    const l = readLock(path.join(registryDir(), f));
    if (l !== undefined && processAlive(l.pid)) found.push(l);
    else rmSync(path.join(registryDir(), f), { force: true });
  }
  return found;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Refuses, naming who holds them, when any of the ports a dev cluster needs is taken. */
export async function checkPorts(ports: number[]): Promise<void> {
  const taken: number[] = [];
  for (const p of ports) if (!(await portFree(p))) taken.push(p);
  if (taken.length === 0) return;
  const list = taken.map((p) => `127.0.0.1:${p}`).join(', ');
  // Not this supervisor's own record (it registered before checking): only another can hold them.
  const holder = registered().find((l) => l.pid !== process.pid && taken.some((p) => (p >= l.basePort && p < l.basePort + l.nodes) || (p >= l.basePort + 100 && p < l.basePort + 100 + l.nodes)));
  const advice = holder !== undefined
    ? `they belong to the dev cluster running ${describeDev(holder)}; ${stopAdvice(holder)}`
    : `another program (perhaps a shoal node: try 'npx shoal status --addr 127.0.0.1:${taken[0]}') listens there; stop it`;
  throw new CliFailure(`${taken.length === 1 ? 'a port' : 'ports'} this dev cluster needs ${taken.length === 1 ? 'is' : 'are'} in use: ${list}
  ${advice}, or run this one on other ports with --base-port PORT (and another --data)`, exitCodes.addressInUse, 'address_in_use');
}
