export type { PeerInfo, PeerStats, Transport, TransportLogger, UnreachableReason } from './types.ts';
export { WsTransport } from './ws-transport.ts';
export type { WsTransportOptions } from './ws-transport.ts';
export { MemoryNetwork, MemoryTransport } from './memory-transport.ts';
export type { MemoryNetworkOptions, MemoryFaults } from './memory-transport.ts';
export { TRANSPORT_LIMITS_DEFAULT } from './limits.ts';
export type { TransportLimits } from './limits.ts';
export { REFUSAL_CODES } from './handshake.ts';
export type { RefusalReason } from './handshake.ts';
