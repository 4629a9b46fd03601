// A node renews its own certificate before it expires, at a random point between 1/2 and 4/5 of
// its lifetime (so the nodes of a cluster made together do not renew together), with a new key:
// it asks a member holding the CA key (POST /v1/join/renew), proving possession of its current
// key, writes the new certificate and key, and hands them to the transport, which uses them for
// new connections at once (no restart). A node whose certificate has expired renews at start
// the same way, as long as it is still a member and not removed.

import { createPrivateKey, sign, X509Certificate } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { Logger } from '../log.ts';
import type { Tls } from '../base/tls-material.ts';
import { issuerIn } from './ca-bundle.ts';
import { addressesLeaderFirst, nodeCall } from './node-client.ts';

export const renewFractionMin = 0.5;
export const renewFractionMax = 0.8;
/** A failed renewal is tried again after this long. */
export const renewRetryMs = 30_000;
/** setTimeout's longest delay; a later renewal is re-planned when it fires. */
const timerMsMax = 2 ** 31 - 1;

/** When to renew a certificate valid from notBefore to notAfter, `random` in [0, 1). */
export function renewAtMs(notBeforeMs: number, notAfterMs: number, random: number): number {
  const fraction = renewFractionMin + (renewFractionMax - renewFractionMin) * random;
  return notBeforeMs + (notAfterMs - notBeforeMs) * fraction;
}

export interface RenewerOptions {
  dataDir: string;
  nodeId: string;
  /** The node's TLS material; replaced in place on renewal. */
  tls: Tls;
  /** Members to ask, and who leads (to ask it first). */
  members: () => { list: ReadonlyArray<{ id: string; apiAddress: string }>; leader: string };
  /** Called with the new material once written (the transport reloads its TLS contexts). */
  onRenewed: (tls: Tls) => void;
  log: Logger;
  /** How to reach the members' APIs (https unless api.insecureLoopback). */
  scheme: 'http' | 'https';
  random?: () => number;
  now?: () => number;
  /**
   * Signs this node's own request when it holds the CA key and no other member can (a one-node
   * cluster); undefined when it holds none. Answers the certificate text to install.
   */
  signLocally?: (csrPem: string) => Promise<string | undefined>;
}

const renewAnswer = z.object({ certPem: z.string() }).loose();

export class CertRenewer {
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly o: RenewerOptions) {}

  /** Plans the next renewal from the current certificate. */
  start(): void {
    const cert = new X509Certificate(this.o.tls.certPem);
    const at = renewAtMs(Date.parse(cert.validFrom), Date.parse(cert.validTo), (this.o.random ?? Math.random)());
    this.schedule(at - (this.o.now ?? Date.now)());
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private schedule(delayMs: number): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    const wait = Math.max(0, Math.min(delayMs, timerMsMax));
    this.timer = setTimeout(() => {
      if (delayMs > timerMsMax) return this.start();
      void this.renewNow().then(() => this.start(), (err: unknown) => {
        this.o.log.warn(`certificate renewal failed (${(err as Error).message}); trying again in ${renewRetryMs / 1000} s`);
        this.schedule(renewRetryMs);
      });
    }, wait);
    this.timer.unref();
  }

  /** Renews once: a new key, a request signed by it, proven with the current key. */
  async renewNow(): Promise<void> {
    const { createCsr } = await import('./csr.ts');
    const { csrPem, keyPem } = await createCsr(this.o.nodeId);
    const proof = sign('sha256', Buffer.from(csrPem), this.o.tls.keyPem).toString('base64');
    const { list, leader } = this.o.members();
    const body = { nodeId: this.o.nodeId, certPem: this.o.tls.certPem, csr: csrPem, proof };
    const errors: string[] = [];
    const others = addressesLeaderFirst(list, leader, this.o.nodeId);
    if (others.length === 0 && this.o.signLocally !== undefined) {
      const certPem = await this.o.signLocally(csrPem);
      if (certPem !== undefined) {
        this.install(certPem, keyPem);
        return;
      }
    }
    for (const addr of others) {
      try {
        const answer = await nodeCall(addr, '/v1/join/renew', body, renewAnswer, { scheme: this.o.scheme, caPem: this.o.tls.caPem });
        this.install(answer.certPem, keyPem);
        return;
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    throw new Error(errors.length === 0 ? 'no other member to ask' : errors.join('; '));
  }

  private install(certPem: string, keyPem: string): void {
    const cert = new X509Certificate(certPem);
    // Any CA of the trust bundle: during a CA rotation the answer may come from the new one.
    if (issuerIn(certPem, this.o.tls.caPem) === undefined || !cert.checkPrivateKey(createPrivateKey(keyPem))) {
      throw new Error('the renewed certificate is not the CA\'s, or not for the new key');
    }
    // Key first, then certificate, each written whole and renamed into place.
    writeAtomic(path.join(this.o.dataDir, 'tls', 'node.key'), keyPem, 0o600);
    writeAtomic(path.join(this.o.dataDir, 'tls', 'node.crt'), certPem, 0o644);
    this.o.tls.certPem = certPem;
    this.o.tls.keyPem = keyPem;
    this.o.onRenewed(this.o.tls);
    this.o.log.info(`renewed this node's certificate (serial ${cert.serialNumber.toLowerCase()}), valid until ${cert.validTo}`);
  }
}

function writeAtomic(file: string, text: string, mode: number): void {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, text, { mode });
  renameSync(tmp, file);
}
