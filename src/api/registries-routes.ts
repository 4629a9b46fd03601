// /v1/registries: registry logins (src/resources/registry-logins.ts). A password goes in (PUT) and
// never comes out: the reads answer the host, the user name and the times. The password is a
// secret of its own (`registry-<id>`), sealed here as a workload secret's value is (from feature
// level 6), written in the same transaction as the login record.
//
//   PUT    /v1/registries/{host}   {username, password}: log in (or change the login)
//   GET    /v1/registries          every login (host, user name, times)
//   DELETE /v1/registries/{host}   log out

import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { deleteChange, putChange, type Change } from '../resources/changes.ts';
import { registriesCollection, secretsCollection } from '../resources/collections.ts';
import {
  canonicalRegistryHost, registryHostPattern, registryLoginId, registryLoginSchema, registryPasswordBytesMax, registrySecretName, registryUsernameBytesMax,
  type RegistryLogin,
} from '../resources/registry-logins.ts';
import { secretRecordSchema, writeSecret, type SecretRecord } from '../resources/secrets.ts';
import { allDocs, type Versioned } from '../resources/state.ts';
import { ShoalError } from '../errors.ts';
import type { ApiContext } from './context.ts';
import { readOnlyQuery } from './control-schemas.ts';
import { readControl } from './control-views.ts';
import { decideAndWrite } from './control-write.ts';
import { noQuery } from './request-schemas.ts';
import { noKeyringYet, sealerFor } from './secrets-routes.ts';
import { validate } from './validate.ts';
import { compareText } from '../base/order.ts';

export const registryParams = z.object({
  host: z.string().max(260).regex(registryHostPattern, 'must be a registry host as docker login takes it (ghcr.io, registry.lan:5000, 10.0.0.5:5000)'),
}).strict();

export const registryLoginBody = z.object({
  username: z.string().min(1).max(registryUsernameBytesMax),
  password: z.string().min(1, 'an empty password is no login').max(registryPasswordBytesMax),
}).strict();

/** What the reads answer of a login: never its password. */
export type RegistryLoginView = Omit<RegistryLogin, 'secret'> & { rev: number };

export const registryLoginViewSchema = registryLoginSchema.omit({ secret: true }).extend({ rev: z.number().int() });

function viewOf(l: Versioned<RegistryLogin>): RegistryLoginView {
  const { secret: _secret, ...rest } = l.value;
  return { ...rest, rev: l.rev };
}

function readLogin(ctx: ApiContext, host: string): Versioned<RegistryLogin> | undefined {
  const d = ctx.store.get(registriesCollection, registryLoginId(host));
  const r = d === undefined ? undefined : registryLoginSchema.safeParse(d.doc);
  return d === undefined || r?.success !== true || r.data.host !== canonicalRegistryHost(host) ? undefined : { value: r.data, rev: d.rev };
}

function readPassword(ctx: ApiContext, name: string): Versioned<SecretRecord> | undefined {
  const d = ctx.store.get(secretsCollection, name);
  const r = d === undefined ? undefined : secretRecordSchema.safeParse(d.doc);
  return d === undefined || r?.success !== true ? undefined : { value: r.data, rev: d.rev };
}

export const registriesRoutes: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.put('/v1/registries/:host', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [registryParams, req.params], query: [noQuery, req.query], body: [registryLoginBody, req.body] });
    const host = canonicalRegistryHost(v.params.host);
    const password = Buffer.from(v.body.password, 'utf8');
    try {
      const w = await decideAndWrite(ctx, req, `logging in to registry ${host}`, () => {
        const cur = readLogin(ctx, host);
        const secret = registrySecretName(host);
        const curPassword = readPassword(ctx, secret);
        const seal = sealerFor(ctx, secret);
        const now = ctx.node.logTimeNow();
        const nextPassword = writeSecret(secret, password, now, curPassword?.value, seal);
        const changes: Change[] = [];
        if (nextPassword !== null) changes.push(putChange(secretsCollection, secret, nextPassword, curPassword?.rev ?? null));
        const sameUser = cur?.value.username === v.body.username;
        const login: RegistryLogin = { host, username: v.body.username, secret, createdAt: cur?.value.createdAt ?? now, updatedAt: sameUser && nextPassword === null ? cur.value.updatedAt : now };
        if (!sameUser || nextPassword !== null) changes.push(putChange(registriesCollection, registryLoginId(host), login, cur?.rev ?? null));
        const outcome = cur === undefined ? 'created' as const : changes.length === 0 ? 'unchanged' as const : 'updated' as const;
        if (changes.length === 0) return { plan: null, answer: { outcome, login } };
        return { plan: noKeyringYet({ changes, compares: [] }, seal !== null), answer: { outcome, login } };
      });
      const { secret: _secret, ...login } = w.answer.login;
      return { outcome: w.answer.outcome, login, rev: w.rev };
    } finally {
      password.fill(0);
    }
  });

  app.get('/v1/registries', { config: { role: 'reader' } }, async (req) => {
    const v = validate({ query: [readOnlyQuery, req.query] });
    const state = await readControl(ctx, v.query.consistency);
    const items: RegistryLoginView[] = [];
    for (const d of allDocs(ctx.store, registriesCollection)) {
      const r = registryLoginSchema.safeParse(d.doc);
      if (r.success) items.push(viewOf({ value: r.data, rev: d.rev }));
      else ctx.node.log.warn(`${registriesCollection}/${d.id} (rev ${d.rev}) is not a valid registry login and is not shown`);
    }
    return { items: items.sort((a, b) => compareText(a.host, b.host)), rev: state.revision };
  });

  app.delete('/v1/registries/:host', { config: { role: 'operator' } }, async (req) => {
    const v = validate({ params: [registryParams, req.params], query: [noQuery, req.query] });
    const host = canonicalRegistryHost(v.params.host);
    const w = await decideAndWrite(ctx, req, `logging out of registry ${host}`, () => {
      const cur = readLogin(ctx, host);
      if (cur === undefined) throw new ShoalError('not_found', `no login for registry ${host}; list them with: shoal registry ls`, { registry: host });
      const changes = [deleteChange(registriesCollection, registryLoginId(host), cur.rev)];
      const password = readPassword(ctx, cur.value.secret);
      if (password !== undefined) changes.push(deleteChange(secretsCollection, cur.value.secret, password.rev));
      return { plan: { changes, compares: [] }, answer: null };
    });
    return { host, removed: true, rev: w.rev };
  });
};
