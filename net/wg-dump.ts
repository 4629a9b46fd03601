// A strict parser of `wg show <interface> dump`: tab-separated, one line for the interface, then
// one per peer (wg(8), "dump"). Every field is checked; a line that does not parse fails the
// whole parse with net_tool_failed rather than yielding a half-understood peer. The interface's
// private key (the dump's first field) is checked and dropped: it is never kept or logged.
//
//   interface: private-key  public-key  listen-port  fwmark
//   peer:      public-key  preshared-key  endpoint  allowed-ips  latest-handshake  transfer-rx  transfer-tx  persistent-keepalive
//
// "(none)" stands for no key, endpoint or allowed IPs; "off" for no fwmark or keepalive; a
// latest-handshake of 0 means none yet.

import { ShoalError } from '../src/errors.ts';
import { isWgKey } from './wg-keys.ts';

export interface WgInterfaceDump {
  /** null before a private key was set. */
  publicKey: string | null;
  listenPort: number;
  fwmark: number | null;
  peers: WgPeerDump[];
}

export interface WgPeerDump {
  publicKey: string;
  hasPresharedKey: boolean;
  /** host:port, `[v6]:port` for IPv6; null until known. */
  endpoint: string | null;
  /** CIDRs, as wg prints them (`10.212.0.2/32`). */
  allowedIps: string[];
  /** Unix seconds of the latest handshake; null if none yet. */
  latestHandshakeSec: number | null;
  rxBytes: number;
  txBytes: number;
  /** Seconds; null when off. */
  persistentKeepaliveSec: number | null;
}

const none = '(none)';

function fail(line: number, why: string): never {
  throw new ShoalError('net_tool_failed', `wg show dump: line ${line}: ${why}`);
}

function key(value: string, line: number, field: string): string {
  if (!isWgKey(value)) fail(line, `${field} is not a key`);
  return value;
}

function optionalKey(value: string, line: number, field: string): string | null {
  return value === none ? null : key(value, line, field);
}

function count(value: string, line: number, field: string, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^(0|[1-9][0-9]*)$/.test(value)) fail(line, `${field} is not a whole number: ${JSON.stringify(value)}`);
  const n = Number(value);
  if (n > max) fail(line, `${field} ${n} is above ${max}`);
  return n;
}

function offOr(value: string, line: number, field: string, max: number): number | null {
  return value === 'off' ? null : count(value, line, field, max);
}

const endpointPattern = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.%a-zA-Z0-9]+\]):\d{1,5}$/;
const cidrPattern = /^([0-9.]+\/\d{1,2}|[0-9a-fA-F:]+\/\d{1,3})$/;

function parsePeer(fields: string[], line: number): WgPeerDump {
  if (fields.length !== 8) fail(line, `a peer line has 8 fields, this one ${fields.length}`);
  const [pub, psk, endpoint, allowed, handshake, rx, tx, keepalive] = fields as [string, string, string, string, string, string, string, string];
  if (endpoint !== none && !endpointPattern.test(endpoint)) fail(line, `endpoint ${JSON.stringify(endpoint)} is not host:port`);
  const allowedIps = allowed === none ? [] : allowed.split(',');
  for (const c of allowedIps) if (!cidrPattern.test(c)) fail(line, `allowed IP ${JSON.stringify(c)} is not a CIDR`);
  const hs = count(handshake, line, 'latest-handshake');
  return {
    publicKey: key(pub, line, 'public-key'),
    hasPresharedKey: optionalKey(psk, line, 'preshared-key') !== null,
    endpoint: endpoint === none ? null : endpoint,
    allowedIps,
    latestHandshakeSec: hs === 0 ? null : hs,
    rxBytes: count(rx, line, 'transfer-rx'),
    txBytes: count(tx, line, 'transfer-tx'),
    persistentKeepaliveSec: offOr(keepalive, line, 'persistent-keepalive', 65_535),
  };
}

/** Parses the output of `wg show <interface> dump` (one interface; no interface-name column). */
export function parseWgDump(text: string): WgInterfaceDump {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const [head, ...rest] = lines;
  if (head === undefined) fail(1, 'empty output');
  const f = head.split('\t');
  if (f.length !== 4) fail(1, `the interface line has 4 fields, this one ${f.length}`);
  optionalKey(f[0] as string, 1, 'private-key');
  const iface: WgInterfaceDump = {
    publicKey: optionalKey(f[1] as string, 1, 'public-key'),
    listenPort: count(f[2] as string, 1, 'listen-port', 65_535),
    fwmark: f[3] === 'off' ? null : fwmark(f[3] as string),
    peers: [],
  };
  rest.forEach((l, i) => iface.peers.push(parsePeer(l.split('\t'), i + 2)));
  return iface;
}

/** wg prints the fwmark in hex (0x...) or decimal depending on version. */
function fwmark(value: string): number {
  if (/^0x[0-9a-f]{1,8}$/i.test(value)) return Number.parseInt(value.slice(2), 16);
  return count(value, 1, 'fwmark', 0xffff_ffff);
}
