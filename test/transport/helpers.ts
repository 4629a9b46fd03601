// Shared fixtures for the transport tests: certificates, loopback transports on port 0,
// a capturing logger, message builders and a polling wait.

import { createCa, issueNodeCert, type PemPair } from '../../src/security/index.ts';
import type { Entry, Message, NodeId } from '../../src/raft/types.ts';
import { decodeFrames } from '../../transport/codec.ts';
import type { Frame } from '../../transport/frames.ts';
import type { TransportLimits } from '../../transport/limits.ts';
import type { TransportLogger, UnreachableReason } from '../../transport/types.ts';
import { WsTransport, type WsTransportOptions } from '../../transport/ws-transport.ts';
import { afterEach } from 'vitest';

export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error';
  msg: string;
}

export class CapturingLogger implements TransportLogger {
  readonly lines: LogLine[] = [];
  debug(msg: string): void { this.lines.push({ level: 'debug', msg }); }
  info(msg: string): void { this.lines.push({ level: 'info', msg }); }
  warn(msg: string): void { this.lines.push({ level: 'warn', msg }); }
  error(msg: string): void { this.lines.push({ level: 'error', msg }); }
  /** Whether a line at warn or above matches. */
  warned(pattern: RegExp): boolean {
    return this.lines.some((l) => (l.level === 'warn' || l.level === 'error') && pattern.test(l.msg));
  }
}

export interface Pki {
  ca: PemPair;
  nodes: Map<NodeId, PemPair>;
}

export async function makePki(nodeIds: NodeId[], clusterId = 'test-cluster'): Promise<Pki> {
  const ca = await createCa(clusterId);
  const nodes = new Map<NodeId, PemPair>();
  for (const id of nodeIds) nodes.set(id, await issueNodeCert(ca, id, { hosts: ['127.0.0.1', 'localhost'] }));
  return { ca, nodes };
}

/** Test defaults: quick reconnects so a restarted peer is back within a few hundred ms. */
export const FAST_LIMITS: Partial<TransportLimits> = { reconnectDelayMinMs: 20, reconnectDelayMaxMs: 200 };

export interface Node {
  id: NodeId;
  t: WsTransport;
  log: CapturingLogger;
  received: Message[];
  unreachable: NodeId[];
  /** The same reports, with how the peer turned out unreachable. */
  unreachableWhy: { id: NodeId; why: UnreachableReason }[];
  snapshotStatus: { id: NodeId; ok: boolean }[];
}

export async function startNode(pki: Pki, nodeId: NodeId, overrides: Partial<WsTransportOptions> = {}): Promise<Node> {
  const cert = pki.nodes.get(nodeId);
  if (cert === undefined) throw new Error(`no certificate for ${nodeId}`);
  const log = new CapturingLogger();
  const t = new WsTransport({
    nodeId,
    clusterId: 'test-cluster',
    listen: { host: '127.0.0.1', port: 0 },
    tls: { caPem: pki.ca.certPem, certPem: cert.certPem, keyPem: cert.keyPem },
    protocolVersion: 1,
    protocolVersionsSupported: { min: 1, max: 1 },
    softwareVersion: '0.1.0-test',
    logger: log,
    ...overrides,
    limits: { ...FAST_LIMITS, ...overrides.limits },
  });
  const node: Node = { id: nodeId, t, log, received: [], unreachable: [], unreachableWhy: [], snapshotStatus: [] };
  t.onMessage((m) => {
    node.received.push(m);
  });
  t.onUnreachable((id, why) => {
    node.unreachable.push(id);
    node.unreachableWhy.push({ id, why });
  });
  t.onSnapshotStatus((id, ok) => node.snapshotStatus.push({ id, ok }));
  await t.start();
  return node;
}

/** Tells each node about the others. */
export function connectAll(...nodes: Node[]): void {
  const peers = nodes.map((n) => ({ id: n.id, address: n.t.address }));
  for (const n of nodes) n.t.setPeers(peers);
}

/** An append of term 1 (after the entry `index` of term 1, or the empty log's entry 0), which the meaning check admits. */
export function message(from: NodeId, to: NodeId, overrides: Partial<Message> = {}): Message {
  const index = overrides.index ?? 0;
  return {
    type: 'app', from, to, term: 1, logTerm: index > 0 ? 1 : 0, index, entries: [], commit: 0, reject: false, rejectHint: 0,
    ...overrides,
  };
}

export function normalEntry(index: number, data: Uint8Array): Entry {
  return { kind: 'normal', term: 1, index, data };
}

export async function waitFor(what: string, predicate: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Exactly one frame from one WebSocket message, as a receiver in a handshake expects it. */
export function decodeFrame(bytes: Uint8Array): { ok: true; frame: Frame } | { ok: false; error: string } {
  const d = decodeFrames(bytes);
  if (!d.ok) return d;
  const [frame] = d.frames;
  return frame !== undefined && d.frames.length === 1 ? { ok: true, frame } : { ok: false, error: `${d.frames.length} frames` };
}

/** The transports a test file starts: push each one; every one is closed after each test. */
export function closedAfterEach(): Node[] {
  const open: Node[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((n) => n.t.close()));
  });
  return open;
}
