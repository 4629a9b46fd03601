// A voter that lacks the CA key asks the members that may hold it (the leader first) for it,
// sealed to its own certificate's key (POST /v1/join/ca-key), checks that the key it opened is
// the CA's, and writes it beside the CA certificate. Learners never get it (the route refuses
// them), so a promoted voter-role joiner gets it within a few seconds of its promotion.

import { createPrivateKey, createPublicKey } from 'node:crypto';
import { z } from 'zod';
import type { Logger } from '../log.ts';
import type { Tls } from '../base/tls-material.ts';
import { caKeyFile } from './authority.ts';
import { addressesLeaderFirst, nodeCall } from './node-client.ts';
import { holdsKeyFile, writeKeyFile } from './key-vault.ts';
import { openWithKey, sealedBoxSchema } from './sealed-box.ts';

export const caKeyFetchIntervalMs = 5_000;
const answerSchema = z.object({ sealed: sealedBoxSchema }).strict();

export interface CaKeyFetcherOptions {
  dataDir: string;
  nodeId: string;
  tls: Tls;
  /** Whether this node is a voter now. */
  isVoter: () => boolean;
  members: () => { list: ReadonlyArray<{ id: string; apiAddress: string }>; leader: string };
  log: Logger;
  /** How to reach the members' APIs (https unless api.insecureLoopback). */
  scheme: 'http' | 'https';
  /** Told once the key is written (an event for the cluster). */
  onReceived?: (from: string) => void;
}

/** Whether `keyPem` is the private half of the certificate's public key. */
export function keyMatchesCert(keyPem: string, certPem: string): boolean {
  const fromKey = createPublicKey(createPrivateKey(keyPem)).export({ format: 'der', type: 'spki' });
  const fromCert = createPublicKey(certPem).export({ format: 'der', type: 'spki' });
  return Buffer.compare(fromKey, fromCert) === 0;
}

export class CaKeyFetcher {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(private readonly o: CaKeyFetcherOptions) {}

  start(): void {
    // Sealed under autolock counts: a locked voter does not fetch a copy to keep in the clear.
    if (holdsKeyFile(caKeyFile(this.o.dataDir))) return;
    this.timer = setInterval(() => { void this.maybeFetch(); }, caKeyFetchIntervalMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  /** One attempt; resolves true once the key is here (tests call it directly). */
  async maybeFetch(): Promise<boolean> {
    const file = caKeyFile(this.o.dataDir);
    if (holdsKeyFile(file)) {
      this.close();
      return true;
    }
    if (this.busy || !this.o.isVoter()) return false;
    this.busy = true;
    try {
      const { list, leader } = this.o.members();
      for (const addr of addressesLeaderFirst(list, leader, this.o.nodeId)) {
        try {
          const answer = await nodeCall(addr, '/v1/join/ca-key', { nodeId: this.o.nodeId, certPem: this.o.tls.certPem }, answerSchema, { scheme: this.o.scheme, caPem: this.o.tls.caPem });
          const keyPem = openWithKey(this.o.tls.keyPem, answer.sealed);
          if (!keyMatchesCert(keyPem, this.o.tls.caPem)) throw new Error('the key it sent is not the CA certificate\'s');
          writeKeyFile(file, keyPem);
          this.o.log.info(`received the cluster CA key from ${addr}: this voter can now sign joins and renewals`);
          this.o.onReceived?.(addr);
          this.close();
          return true;
        } catch (err) {
          this.o.log.debug(`CA key from ${addr}: ${(err as Error).message}`);
        }
      }
      return false;
    } finally {
      this.busy = false;
    }
  }
}
