// A Service's network aliases (issue 39, Compose's `networks.<net>.aliases`): more DNS names of
// the service on one of its networks, answered by the node's service resolver (net/dns-view.ts)
// with the addresses of the service's tasks on that network, as its own name is. Feature level 6
// (featureLevelContainerSettings), like the container settings, and left out of the record when
// there are none (src/resources/record-compat.ts).

import { specLimits } from './limits.ts';
import { INVALID, describe, isPlainObject, keyPath, list, type Problems, type Reader } from './reader.ts';
import { dnsLabel } from './service-fields.ts';

/** The most aliases a service has on one network. */
export const networkAliasesMax = 16;

/** `networkAliases: {backend: [db, postgres]}`: network name to aliases (each a DNS label). Keys sorted, aliases sorted and distinct. */
export const networkAliases: Reader<Record<string, string[]>> = (value, at, problems) => {
  if (!isPlainObject(value)) {
    problems.add(at, `must be a mapping of network names to lists of names, not ${describe(value)}`);
    return INVALID;
  }
  const keys = Object.keys(value).sort();
  if (keys.length > specLimits.listItemsMax) {
    problems.add(at, `has ${keys.length} entries; at most ${specLimits.listItemsMax}`);
    return INVALID;
  }
  const out: Record<string, string[]> = {};
  let ok = true;
  for (const key of keys) {
    const where = keyPath(at, key);
    const network = dnsLabel(key, where, problems);
    const names = list(dnsLabel, networkAliasesMax)(value[key], where, problems);
    if (network === INVALID || names === INVALID) {
      ok = false;
      continue;
    }
    const seen = new Map<string, number>();
    names.forEach((n, i) => {
      const first = seen.get(n);
      if (first !== undefined) {
        problems.add(`${where}[${i}]`, `${n} is already given by [${first}]`);
        ok = false;
      } else seen.set(n, i);
    });
    out[network] = [...seen.keys()].sort();
  }
  return ok ? out : INVALID;
};

/**
 * Each aliased network is one of the service's networks, and an alias is not the service's own
 * name (which it answers as already).
 */
export function checkNetworkAliases(
  aliases: Readonly<Record<string, readonly string[]>> | undefined, s: { name?: string; networks?: readonly string[] }, at: string, problems: Problems,
): void {
  for (const [network, names] of Object.entries(aliases ?? {})) {
    const where = keyPath(`${at}.networkAliases`, network);
    if (!(s.networks ?? []).includes(network)) {
      problems.add(where, `the service is not on the network ${network}: add it to networks, or drop its aliases`);
      continue;
    }
    names.forEach((n, i) => {
      if (n === s.name) problems.add(`${where}[${i}]`, `${n} is the service's own name, which it answers as already; drop it`);
    });
  }
}
