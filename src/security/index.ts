export { createCa, issueNodeCert, caFingerprint, CA_VALID_DAYS_DEFAULT, NODE_CERT_VALID_DAYS_DEFAULT } from './certificates.ts';
export type { PemPair, CaOptions, NodeCertOptions } from './certificates.ts';
export { nodeIdFromCert, nodeIdFromCertPem, nodeIdUri, isValidId, NODE_ID_URI_PREFIX } from './identity.ts';
export type { PeerCertificateLike } from './identity.ts';
