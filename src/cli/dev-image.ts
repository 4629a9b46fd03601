// shoal dev demo-image: for a machine with no registry to pull from, one command that puts a
// small image into the local Docker daemon (Debian's static busybox, imported: nothing is
// pulled), which docs/examples/web-local.yaml runs. It needs Docker, not a running dev cluster:
// the dev cluster's nodes share the machine's daemon, so they find the image at once.

import Docker from 'dockerode';
import { describeEndpoint, resolveDockerEndpoint } from '../executor/docker-endpoint.ts';
import { busyboxPath, ensureBusyboxImage } from '../executor/busybox-image.ts';
import { exitCodes, parse, UsageError } from './args.ts';
import { CliFailure } from './client.ts';

export const demoImage = 'shoal-demo/busybox:local';
export const localExample = 'docs/examples/web-local.yaml';

export const devDemoImageUsage = 'Usage: shoal dev demo-image [--json]';

const pingTimeoutMs = 3_000;

export async function demoImageCommand(argv: string[], help: string): Promise<number> {
  const { values, positionals } = parse(argv, {
    json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false },
  }, devDemoImageUsage);
  if (values.help) {
    console.log(help);
    return exitCodes.ok;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals.join(' ')}'`, devDemoImageUsage);
  const endpoint = resolveDockerEndpoint({ env: process.env });
  const docker = new Docker(endpoint.kind === 'unix' ? { socketPath: endpoint.socketPath } : { host: endpoint.host, port: endpoint.port, protocol: 'http' });
  const where = describeEndpoint(endpoint);
  try {
    // dockerode's ping takes options (an abort signal) though its typings say it does not.
    const ping = docker.ping.bind(docker) as unknown as (opts: { abortSignal: AbortSignal }) => Promise<unknown>;
    await ping({ abortSignal: AbortSignal.timeout(pingTimeoutMs) });
  } catch (err) {
    throw new CliFailure(`Docker does not answer at ${where} (${(err as Error).message}); install and start it (Debian/Ubuntu: sudo apt-get install docker.io; sudo systemctl start docker), then run this again`, exitCodes.unavailable, 'unavailable');
  }
  let outcome: 'present' | 'imported';
  try {
    outcome = await ensureBusyboxImage(docker, demoImage);
  } catch (err) {
    const message = (err as Error).message;
    throw new CliFailure(message.includes(busyboxPath) ? message : `importing ${demoImage} into Docker at ${where} failed: ${message}`, exitCodes.failed, 'failed');
  }
  if (values.json) {
    console.log(JSON.stringify({ image: demoImage, outcome, docker: where, example: localExample }));
  } else {
    console.log(`${outcome === 'imported' ? `imported ${demoImage} (${busyboxPath}, from Debian's busybox-static) into` : `${demoImage} is already in`} Docker at ${where}
run it with: npx shoal apply -f ${localExample}    (then: npx shoal service ps web)`);
  }
  return exitCodes.ok;
}

/** What the help says about the image, for `shoal dev --help`. */
export const demoImageHelp = `  demo-image     put ${demoImage} into the local Docker daemon, for a machine with
                 no registry to pull from: Debian's static busybox (${busyboxPath}, package
                 busybox-static), imported, nothing pulled; ${localExample} runs
                 it. An image already there is kept`;
