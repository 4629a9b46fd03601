// Digest pinning on every path that writes an image (docs/docker.md, "Pinned digests"), not only
// /v1/apply of a service: `shoal service update --image` (which applies through /v1/apply),
// POST /v1/stacks/NAME/deploy (compose), and jobs' specs. One node running the control plane on
// the in-memory runtime, whose registry answers what `publish` says a tag names.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcess } from '../cli/in-process.ts';
import { singleNode, type SingleNode } from './single-node.ts';

const digest = (c: string) => `sha256:${c.repeat(64)}`;

let s: SingleNode;
let addr: string[];
beforeAll(async () => {
  s = await singleNode({ control: true });
  const address = await s.app.listen({ port: 0, host: '127.0.0.1' });
  addr = ['--addr', address.replace('http://', '')];
});
afterAll(async () => { await s.close(); });

async function get<T>(url: string): Promise<T> {
  const res = await s.app.inject({ url });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as T;
}
const specOf = async (name: string) => (await get<{ service: { record: { spec: { image: string }; specVersion: number; imagePlatforms?: unknown } } }>(`/v1/services/${name}`)).service.record;

describe('pinning beyond /v1/apply of a service', () => {
  it('service update --image pins the new tag, keeps the pin of an unchanged one, and follows the tag with --resolve-image always', async () => {
    const rt = s.runtime!;
    rt.publish('reg.lan/team/api:1', digest('1'));
    rt.publish('reg.lan/team/api:2', digest('2'), [{ os: 'linux', architecture: 'arm64', variant: 'v8' }]);
    const applied = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text: 'apiVersion: shoal/v1\nkind: Service\nname: api\nimage: reg.lan/team/api:1\nreplicas: 0\n' } });
    expect(applied.statusCode, applied.body).toBe(200);
    expect((await specOf('api')).spec.image).toBe(`reg.lan/team/api:1@${digest('1')}`);

    const updated = await inProcess('service', 'update', 'api', '--image', 'reg.lan/team/api:2', '--detach', ...addr);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toContain(`api: image reg.lan/team/api:2 pinned to ${digest('2')}`);
    const after = await specOf('api');
    expect(after).toMatchObject({ spec: { image: `reg.lan/team/api:2@${digest('2')}` }, specVersion: 2 });
    // What the new image offers goes into the record for placement, next to the previous spec's.
    expect(after.imagePlatforms).toContainEqual({ image: `reg.lan/team/api:2@${digest('2')}`, platforms: [{ os: 'linux', architecture: 'arm64', variant: 'v8' }] });

    // Another flag leaves the pinned image as it is, though the tag has moved...
    rt.publish('reg.lan/team/api:2', digest('3'));
    const env = await inProcess('service', 'update', 'api', '--env', 'A=1', '--detach', ...addr);
    expect(env.code, env.stderr).toBe(0);
    expect((await specOf('api')).spec.image).toBe(`reg.lan/team/api:2@${digest('2')}`);
    // ...and --resolve-image always follows the tag.
    const always = await inProcess('service', 'update', 'api', '--resolve-image', 'always', '--detach', ...addr);
    expect(always.code, always.stderr).toBe(0);
    expect((await specOf('api')).spec.image).toBe(`reg.lan/team/api:2@${digest('3')}`);
    // never: the tag as given.
    const never = await inProcess('service', 'update', 'api', '--image', 'reg.lan/team/api:1', '--resolve-image', 'never', '--detach', ...addr);
    expect(never.code, never.stderr).toBe(0);
    expect((await specOf('api')).spec.image).toBe('reg.lan/team/api:1');
    const bad = await inProcess('service', 'update', 'api', '--image', 'x:1', '--resolve-image', 'sometimes', ...addr);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("--resolve-image takes always, changed or never, not 'sometimes'")]);
  });

  it('a stack deploy pins its services\' images as apply does, and honours resolveImage', async () => {
    s.runtime!.publish('reg.lan/team/web:1', digest('4'));
    const deploy = (query = '') => s.app.inject({
      method: 'POST', url: `/v1/stacks/shop/deploy${query}`, payload: { files: [{ path: 'compose.yaml', text: 'services:\n  web:\n    image: reg.lan/team/web:1\n    deploy: {replicas: 0}\n' }] },
    });
    const dry = await deploy('?resolveImage=never&dryRun=true');
    expect(dry.statusCode, dry.body).toBe(200);
    expect((dry.json() as { images?: unknown }).images).toBeUndefined();
    const res = await deploy();
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { images: unknown[] }).images).toEqual([{ service: 'shop-web', requested: 'reg.lan/team/web:1', image: `reg.lan/team/web:1@${digest('4')}`, outcome: 'resolved', digest: digest('4'), platforms: [{ os: 'linux', architecture: 'amd64' }] }]);
    expect(await specOf('shop-web')).toMatchObject({ spec: { image: `reg.lan/team/web:1@${digest('4')}` }, imagePlatforms: [{ image: `reg.lan/team/web:1@${digest('4')}` }] });
    // The same files again: the pin is kept, nothing changes.
    const again = await deploy();
    expect((again.json() as { services: Array<{ outcome: string }>; images: Array<{ outcome: string }> })).toMatchObject({ services: [{ outcome: 'unchanged' }], images: [{ outcome: 'kept' }] });
  });

  it('a stack deploy pins the image of a replicated-job (a Job of the stack)', async () => {
    s.runtime!.publish('reg.lan/team/migrate:1', digest('7'));
    const res = await s.app.inject({
      method: 'POST', url: '/v1/stacks/mig/deploy',
      payload: { files: [{ path: 'compose.yaml', text: 'services:\n  migrate:\n    image: reg.lan/team/migrate:1\n    command: ["true"]\n    deploy: {mode: replicated-job}\n' }] },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { images: unknown[] }).images).toEqual([expect.objectContaining({ job: 'mig-migrate', image: `reg.lan/team/migrate:1@${digest('7')}`, outcome: 'resolved' })]);
    expect((await get<{ spec: { image: string } }>('/v1/jobs/mig-migrate')).spec.image).toBe(`reg.lan/team/migrate:1@${digest('7')}`);
  });

  it('pins a job\'s image at apply, and keeps the pin while its tag is unchanged', async () => {
    s.runtime!.publish('reg.lan/team/backup:1', digest('5'));
    const text = 'apiVersion: shoal/v1\nkind: Job\nname: backup\nimage: reg.lan/team/backup:1\nschedule: "0 3 * * *"\n';
    const res = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text } });
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { images: unknown[] }).images).toEqual([{ job: 'backup', requested: 'reg.lan/team/backup:1', image: `reg.lan/team/backup:1@${digest('5')}`, outcome: 'resolved', digest: digest('5'), platforms: [{ os: 'linux', architecture: 'amd64' }] }]);
    const jobImage = async () => (await get<{ spec: { image: string } }>('/v1/jobs/backup')).spec.image;
    expect(await jobImage()).toBe(`reg.lan/team/backup:1@${digest('5')}`);
    // What the image offers goes into the job record, for its runs' placement (as a service's).
    expect((await get<{ doc: { imagePlatforms?: unknown } }>('/v1/docs/shoal.jobs/backup')).doc.imagePlatforms).toEqual([{ image: `reg.lan/team/backup:1@${digest('5')}`, platforms: [{ os: 'linux', architecture: 'amd64' }] }]);
    s.runtime!.publish('reg.lan/team/backup:1', digest('6'));
    const again = await s.app.inject({ method: 'POST', url: '/v1/apply', payload: { text } });
    expect((again.json() as { jobs: Array<{ outcome: string }>; images: Array<{ outcome: string }> })).toMatchObject({ jobs: [{ outcome: 'unchanged' }], images: [{ outcome: 'kept' }] });
    expect(await jobImage()).toBe(`reg.lan/team/backup:1@${digest('5')}`);
  });
});
