// /v1/networks: the overlay networks (created and changed by POST /v1/apply), each with its
// allocation (each node's slice, each task's address) and the services attached to it; and
// removal, refused while a service still names the network. Reads are for any reader; the
// write is an operator's.

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { planNetworkRemove, servicesOnNetwork } from '../control/network-apply.ts';
import { readNetworkState, type NetworkRecord, type NetworkState } from '../resources/network-resources.ts';
import { formatCidr } from '../resources/address-cidr.ts';
import { sliceCidr } from '../resources/address-allocator.ts';
import type { ControlState, Versioned } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery, serviceNameSchema } from './control-schemas.ts';
import { readControl } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { compareText } from '../base/order.ts';

export const networkParams = z.object({ name: serviceNameSchema }).strict();

export interface NetworkView {
  name: string;
  rev: number;
  record: NetworkRecord;
  /** Each node's slice as a CIDR block. */
  slices: Record<string, string>;
  /** Tasks holding an address. */
  addresses: number;
  /** Services attached to it. */
  services: string[];
}

export function networkView(state: ControlState, n: Versioned<NetworkRecord>): NetworkView {
  const slices = Object.fromEntries(Object.entries(n.value.slices).map(([node, i]) => [node, formatCidr(sliceCidr(n.value.spec, i))]));
  return { name: n.value.name, rev: n.rev, record: n.value, slices, addresses: Object.keys(n.value.addresses).length, services: servicesOnNetwork(state, n.value.name) };
}

function findNetwork(nets: NetworkState, name: string): Versioned<NetworkRecord> {
  const n = nets.networks.get(name);
  if (n === undefined) throw new ShoalError('not_found', `no network ${name}`, { network: name });
  return n;
}

export const networkRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/networks', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const nets = readNetworkState(ctx.store);
    return { items: [...nets.networks.values()].map((n) => networkView(state, n)).sort((a, b) => compareText(a.name, b.name)), rev: state.revision };
  });

  app.get('/v1/networks/:name', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [networkParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    return { network: networkView(state, findNetwork(readNetworkState(ctx.store), v.params.name)), rev: state.revision };
  });

  app.delete('/v1/networks/:name', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [networkParams, req.params], query: [noQuery, req.query] });
    const w = await decideAndWrite(ctx, req, `removing network ${v.params.name}`, (state) => {
      const nets = readNetworkState(ctx.store);
      findNetwork(nets, v.params.name);
      return { plan: planNetworkRemove(state, nets, v.params.name) ?? null, answer: null };
    });
    return { name: v.params.name, removed: true, rev: w.rev };
  });
};
