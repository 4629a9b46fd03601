// /v1/firewall-policies: who may reach what (created and changed by POST /v1/apply), and
// removal. Removing a policy closes what it allowed on every node, established connections
// included (net/firewall.ts). Reads are for any reader; the write is an operator's.

import type { FastifyPluginAsync } from 'fastify';
import { planPolicyRemove } from '../control/network-apply.ts';
import { readNetworkState, type FirewallPolicyRecord, type NetworkState } from '../resources/network-resources.ts';
import type { Versioned } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery } from './control-schemas.ts';
import { readControl } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { networkParams } from './network-routes.ts';
import { noQuery } from './request-schemas.ts';
import { validate } from './validate.ts';
import { compareText } from '../base/order.ts';

export interface PolicyView {
  name: string;
  rev: number;
  record: FirewallPolicyRecord;
}

const view = (p: Versioned<FirewallPolicyRecord>): PolicyView => ({ name: p.value.name, rev: p.rev, record: p.value });

function findPolicy(nets: NetworkState, name: string): Versioned<FirewallPolicyRecord> {
  const p = nets.policies.get(name);
  if (p === undefined) throw new ShoalError('not_found', `no firewall policy ${name}`, { policy: name });
  return p;
}

export const policyRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.get('/v1/firewall-policies', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const nets = readNetworkState(ctx.store);
    return { items: [...nets.policies.values()].map(view).sort((a, b) => compareText(a.name, b.name)), rev: state.revision };
  });

  app.get('/v1/firewall-policies/:name', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ params: [networkParams, req.params], query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    return { policy: view(findPolicy(readNetworkState(ctx.store), v.params.name)), rev: state.revision };
  });

  app.delete('/v1/firewall-policies/:name', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [networkParams, req.params], query: [noQuery, req.query] });
    const w = await decideAndWrite(ctx, req, `removing firewall policy ${v.params.name}`, () => {
      const nets = readNetworkState(ctx.store);
      findPolicy(nets, v.params.name);
      return { plan: planPolicyRemove(nets, v.params.name) ?? null, answer: null };
    });
    return { name: v.params.name, removed: true, rev: w.rev };
  });
};
