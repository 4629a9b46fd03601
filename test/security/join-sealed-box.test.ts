// A secret sealed to a node's certificate opens only with that node's key, and not once changed.

import { describe, expect, it } from 'vitest';
import { createCa, issueNodeCert } from '../../src/security/certificates.ts';
import { openWithKey, sealForCert } from '../../src/security/sealed-box.ts';

describe('sealed box', () => {
  it('opens with the certificate\'s key only, and refuses a changed box', async () => {
    const ca = await createCa('c1');
    const a = await issueNodeCert(ca, 'node-a', { hosts: [] });
    const b = await issueNodeCert(ca, 'node-b', { hosts: [] });
    const box = sealForCert(a.certPem, ca.keyPem);
    expect(openWithKey(a.keyPem, box)).toBe(ca.keyPem);
    expect(() => openWithKey(b.keyPem, box)).toThrow();
    const flipped = Buffer.from(box.ciphertext, 'base64');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    expect(() => openWithKey(a.keyPem, { ...box, ciphertext: flipped.toString('base64') })).toThrow();
    expect(box.ciphertext).not.toContain('PRIVATE KEY');
  });
});
