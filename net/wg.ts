// A small wrapper over the `ip` and `wg` tools for one WireGuard interface: create or adopt it,
// configure it in one step (`wg syncconf`), set its address and MTU, and read it back
// (`wg show dump`, `ip -j`). Every call goes through the ToolRunner (wg-command.ts); every
// output read is machine-readable and parsed strictly.
//
// The interface is the kernel's (`ip link add ... type wireguard`) where the module is present,
// and otherwise a `wireguard-go` process. That process must outlive shoal: a restart or an
// upgrade of shoal must not cut the mesh. So it is started in its own session (setsid: neither a
// signal to shoal's process group nor the end of shoal's session reaches it), and a shoal that
// starts again finds the interface up and adopts it as it is. Under systemd, whose default
// KillMode kills every process of the unit's cgroup on stop, it would be started as a unit of its
// own (`systemd-run --unit shoal-wg-<if> wireguard-go -f <if>`) when systemd runs the machine
// (`/run/systemd/system` exists): that is what `spawnWireguardGo` does there.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { ShoalError } from '../src/errors.ts';
import { runTool, type ToolRunner } from './wg-command.ts';
import { parseWgDump, type WgInterfaceDump } from './wg-dump.ts';
import { isWgKey } from './wg-keys.ts';

/** Linux interface names: 1..15 characters, no '/', ':' or whitespace. */
export const ifnamePattern = /^[A-Za-z0-9_.-]{1,15}$/;

/** How long to wait for wireguard-go's interface to appear. */
export const wireguardGoStartMs = 5_000;

export interface WgPeerConfig {
  publicKey: string;
  /** host:port (IPv4) or [v6]:port; null: none known (the peer must reach us first). */
  endpoint: string | null;
  /** CIDRs routed to this peer: its mesh address as /32. */
  allowedIps: string[];
  persistentKeepaliveSec: number | null;
}

export interface WgConfig {
  privateKey: string;
  listenPort: number;
  peers: WgPeerConfig[];
}

const ipLinkSchema = z.array(z.object({ ifname: z.string(), mtu: z.number().int(), flags: z.array(z.string()) }).loose());
const ipAddrSchema = z.array(z.object({
  ifname: z.string(),
  addr_info: z.array(z.object({ family: z.string(), local: z.string(), prefixlen: z.number().int() }).loose()),
}).loose());

export interface LinkInfo {
  mtu: number;
  up: boolean;
}

/** How the interface came to be: `kernel`, `wireguard-go` (started now), or `adopted` (it was there). */
export type InterfaceOrigin = 'kernel' | 'wireguard-go' | 'adopted';

export type WireguardGoLauncher = (ifname: string) => Promise<void>;

export class WgInterface {
  constructor(
    readonly name: string,
    private readonly run: ToolRunner = runTool,
    private readonly launchWireguardGo: WireguardGoLauncher = spawnWireguardGo,
  ) {
    if (!ifnamePattern.test(name)) throw new ShoalError('config_invalid', `${JSON.stringify(name)} is not an interface name (1-15 letters, digits, _ . -)`);
  }

  /** The link, or null when there is none by this name. */
  async link(): Promise<LinkInfo | null> {
    let out: string;
    try {
      out = await this.run('ip', ['-j', 'link', 'show', 'dev', this.name]);
    } catch (err) {
      // `ip link show dev X` fails for a missing device; anything else is a real failure.
      if (err instanceof ShoalError && /does not exist|Cannot find device/.test(String(err.details?.stderr ?? ''))) return null;
      throw err;
    }
    const parsed = ipLinkSchema.safeParse(JSON.parse(out));
    const l = parsed.success ? parsed.data[0] : undefined;
    if (l === undefined) throw new ShoalError('net_tool_failed', `ip -j link show dev ${this.name}: unexpected output`);
    return { mtu: l.mtu, up: l.flags.includes('UP') };
  }

  /** Creates the interface unless it exists (then it is adopted, untouched). */
  async ensure(): Promise<InterfaceOrigin> {
    if (await this.link() !== null) return 'adopted';
    try {
      await this.run('ip', ['link', 'add', 'dev', this.name, 'type', 'wireguard']);
      return 'kernel';
    } catch (err) {
      if (!(err instanceof ShoalError) || !/Unknown device type|not supported|Operation not supported/i.test(String(err.details?.stderr ?? ''))) throw err;
    }
    await this.launchWireguardGo(this.name);
    for (const until = Date.now() + wireguardGoStartMs; Date.now() < until;) {
      if (await this.link() !== null) return 'wireguard-go';
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new ShoalError('net_tool_failed', `wireguard-go ${this.name} started, but the interface did not appear within ${wireguardGoStartMs} ms`);
  }

  /** Sets the MTU and brings the link up (idempotent). */
  async up(mtu: number): Promise<void> {
    await this.run('ip', ['link', 'set', 'dev', this.name, 'mtu', String(mtu), 'up']);
  }

  /** The interface's IPv4 addresses as CIDRs (`10.212.0.3/16`). */
  async addresses(): Promise<string[]> {
    const parsed = ipAddrSchema.safeParse(JSON.parse(await this.run('ip', ['-j', '-4', 'addr', 'show', 'dev', this.name])));
    if (!parsed.success) throw new ShoalError('net_tool_failed', `ip -j addr show dev ${this.name}: unexpected output`);
    return parsed.data.flatMap((l) => l.addr_info.filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`));
  }

  async addAddress(cidr: string): Promise<void> {
    await this.run('ip', ['addr', 'replace', cidr, 'dev', this.name]);
  }

  async removeAddress(cidr: string): Promise<void> {
    await this.run('ip', ['addr', 'del', cidr, 'dev', this.name]);
  }

  /** The interface as `wg show dump` reports it (peers with handshakes and counters). */
  async show(): Promise<WgInterfaceDump> {
    return parseWgDump(await this.run('wg', ['show', this.name, 'dump']));
  }

  /**
   * Makes the interface's WireGuard state exactly `config`, in one call: peers not in it are
   * removed, changed ones updated; a peer that did not change keeps its session (`wg syncconf`,
   * unlike `setconf`, does not reset it). wg reads the config from a file (Node's stdin for a
   * child is a socket, which /dev/stdin cannot open), so it is written, private key included, to
   * a file of mode 0600 in a fresh directory of mode 0700, removed right after.
   */
  async sync(config: WgConfig): Promise<void> {
    const text = renderWgConfig(config);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'shoal-wg-'));
    try {
      const file = path.join(dir, `${this.name}.conf`);
      writeFileSync(file, text, { mode: 0o600 });
      await this.run('wg', ['syncconf', this.name, file]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  /** Deletes the interface (a wireguard-go process exits with it). */
  async remove(): Promise<void> {
    await this.run('ip', ['link', 'del', 'dev', this.name]);
  }
}

const endpointPattern = /^([A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9a-fA-F:]+\]):\d{1,5}$/;
const cidrPattern = /^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/;

/** The wg(8) config file for `config`; every value is checked, so nothing can add a line or a key. */
export function renderWgConfig(config: WgConfig): string {
  if (!isWgKey(config.privateKey)) throw new ShoalError('bad_request', 'the private key is not a WireGuard key');
  if (!Number.isInteger(config.listenPort) || config.listenPort < 1 || config.listenPort > 65_535) throw new ShoalError('bad_request', `listen port ${config.listenPort} is not in 1..65535`);
  const lines = ['[Interface]', `PrivateKey = ${config.privateKey}`, `ListenPort = ${config.listenPort}`];
  for (const p of config.peers) {
    if (!isWgKey(p.publicKey)) throw new ShoalError('bad_request', `peer key ${JSON.stringify(p.publicKey)} is not a WireGuard key`);
    if (p.endpoint !== null && !endpointPattern.test(p.endpoint)) throw new ShoalError('bad_request', `peer endpoint ${JSON.stringify(p.endpoint)} is not host:port`);
    for (const c of p.allowedIps) if (!cidrPattern.test(c)) throw new ShoalError('bad_request', `allowed IP ${JSON.stringify(c)} is not an IPv4 CIDR`);
    lines.push('', '[Peer]', `PublicKey = ${p.publicKey}`);
    if (p.endpoint !== null) lines.push(`Endpoint = ${p.endpoint}`);
    if (p.allowedIps.length > 0) lines.push(`AllowedIPs = ${p.allowedIps.join(', ')}`);
    if (p.persistentKeepaliveSec !== null) lines.push(`PersistentKeepalive = ${p.persistentKeepaliveSec}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Starts `wireguard-go <ifname>` so that it outlives shoal: a transient systemd unit where
 * systemd runs the machine, else a process in a session of its own (setsid) whose daemonized
 * child is reparented to init once its parent exits. That second way does not go through the
 * command runner: the daemon inherits whatever stdio it is given and keeps it for as long as it
 * runs, so its output is not captured (stdio ignored) and the call ends at the first process's
 * exit, or fails after wireguardGoStartMs.
 */
export async function spawnWireguardGo(ifname: string): Promise<void> {
  if (existsSync('/run/systemd/system') && process.env.SHOAL_WIREGUARD_GO_NO_SYSTEMD !== '1') {
    await runTool('systemd-run', ['--unit', `shoal-wg-${ifname}`, '--collect', '--quiet', 'wireguard-go', '-f', ifname]);
    return;
  }
  await new Promise<void>((resolve, reject) => {
    // Without -f, wireguard-go forks the daemon and the first process exits 0 once it is up.
    const child = spawn('wireguard-go', [ifname], { detached: true, stdio: 'ignore', env: { ...process.env, LOG_LEVEL: 'error' } });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new ShoalError('net_tool_failed', `wireguard-go ${ifname} did not start within ${wireguardGoStartMs} ms and was killed`, { cmd: 'wireguard-go', reason: 'timeout' }));
    }, wireguardGoStartMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new ShoalError('net_tool_failed', `wireguard-go ${ifname}: ${e.message}`, { cmd: 'wireguard-go' }));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new ShoalError('net_tool_failed', `wireguard-go ${ifname} exited with ${code}`, { cmd: 'wireguard-go', code }));
    });
    child.unref();
  });
}
