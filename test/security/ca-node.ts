// A one-voter node (test/api/single-node.ts) that holds a test cluster CA, as a leader with the
// CA key does, listening on a free loopback port: what the join, token and renewal tests ask.

import { memoryCaAuthority } from '../../src/security/authority.ts';
import { createCa, type PemPair } from '../../src/security/certificates.ts';
import { listeningSingleNode, type SingleNode } from '../api/single-node.ts';

export interface CaNode {
  n: SingleNode;
  ca: PemPair;
  /** host:port of its API. */
  addr: string;
}

export async function caNode(): Promise<CaNode> {
  const { n, addr } = await listeningSingleNode();
  const ca = await createCa('test-cluster');
  n.ctx.security = memoryCaAuthority(ca);
  return { n, ca, addr };
}
