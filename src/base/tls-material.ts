// A node's TLS material as PEM text: the cluster CA bundle it trusts, its certificate and key.
// Read from the data directory by src/node/identity.ts and handed to the transport, the API
// and the certificate agents, which need the shape and nothing of how it is stored.

export interface Tls {
  caPem: string;
  certPem: string;
  keyPem: string;
}
