// A Service's fixed addresses (issue 39, Compose's `networks.<net>.ipv4_address`): the one task
// of a service of one replica gets exactly this address on that network, reserved in the
// network's allocation (address-allocator.ts) so no other task is handed it. Feature level 6
// (featureLevelContainerSettings), left out of the record when there are none
// (src/resources/record-compat.ts).
//
// What the spec alone can say is checked here: an IPv4 address, on one of the service's
// networks, one replica, replaced stop-first (two tasks of the slot cannot hold one address at
// once). What needs the store (inside the network's subnet, not a slice's reserved address, not
// another service's) is checked at apply (src/control/network-apply.ts).

import { isIPv4 } from 'node:net';
import { blockSize, cidrContains, cidrOf, parseAddress } from '../address-cidr.ts';
import { INVALID, describe, isPlainObject, keyPath, type Problems, type Reader } from './reader.ts';
import { dnsLabel } from './service-fields.ts';
import type { NetworkSpec } from './network-spec.ts';

/** `networkAddresses: {backend: 10.20.0.50}`: network name to an IPv4 address. Keys sorted. */
export const networkAddresses: Reader<Record<string, string>> = (value, at, problems) => {
  if (!isPlainObject(value)) {
    problems.add(at, `must be a mapping of network names to IPv4 addresses, not ${describe(value)}`);
    return INVALID;
  }
  const out: Record<string, string> = {};
  let ok = true;
  for (const key of Object.keys(value).sort()) {
    const where = keyPath(at, key);
    const network = dnsLabel(key, where, problems);
    const address = value[key];
    if (typeof address !== 'string' || !isIPv4(address)) {
      problems.add(where, `${typeof address === 'string' ? JSON.stringify(address) : describe(address)} is not an IPv4 address (shoal networks are IPv4: 10.20.0.50)`);
      ok = false;
      continue;
    }
    if (network === INVALID) ok = false;
    else out[network] = address;
  }
  return ok ? out : INVALID;
};

/**
 * A fixed address is on one of the service's networks, of a service that runs one task
 * (replicated, at most one replica) replaced stop-first.
 */
export function checkNetworkAddresses(
  s: { networkAddresses?: Readonly<Record<string, string>>; networks?: readonly string[]; mode?: string; replicas?: number | null; update?: { order: string } },
  at: string, problems: Problems,
): void {
  const fixed = Object.entries(s.networkAddresses ?? {});
  if (fixed.length === 0) return;
  const where = `${at}.networkAddresses`;
  for (const [network] of fixed) {
    if (!(s.networks ?? []).includes(network)) problems.add(keyPath(where, network), `the service is not on the network ${network}: add it to networks, or drop its address`);
  }
  if (s.mode === 'global') problems.add(where, 'a global service runs a task on every node, and one address cannot be every task\'s: drop the addresses, or make it replicated with one replica');
  else if (s.replicas !== undefined && s.replicas !== null && s.replicas > 1) {
    problems.add(where, `the service has ${s.replicas} replicas, and one address can be only one task's: run one replica, or drop the addresses (the tasks then resolve by the service's name)`);
  }
  if (s.update?.order === 'start-first') {
    problems.add(where, 'a service with a fixed address is updated stop-first: its new task can take the address only once the old one gave it back (update.order: stop-first)');
  }
}

/**
 * Why `address` cannot be fixed on network `spec` (outside its subnet, or a slice's first,
 * gateway or last address, which tasks are never given), or null when it can.
 */
export function fixedAddressProblem(spec: Pick<NetworkSpec, 'name' | 'subnet' | 'slicePrefix'>, address: string): string | null {
  const n = parseAddress(address);
  const subnet = cidrOf(spec.subnet);
  if (n === null || !cidrContains(subnet, n)) return `${address} is not in the subnet ${spec.subnet} of network ${spec.name}: pick an address inside it`;
  const size = blockSize(spec.slicePrefix);
  const offset = (n - subnet.base) % size;
  if (offset === 0 || offset === 1 || offset === size - 1) {
    const what = offset === 1 ? 'a node\'s gateway on the network' : n === subnet.base ? 'the network\'s own address' : offset === 0 ? 'the first address of a slice' : 'the last address of a slice';
    return `${address} is ${what} (network ${spec.name} gives each node a /${spec.slicePrefix} slice of ${spec.subnet}, whose first, second (the gateway) and last addresses no task is given): pick another address`;
  }
  return null;
}
