// Named volumes with options (issue 39's compose `driver_opts`: an NFS or CIFS share, a tmpfs, a
// bind). The node creates such a volume itself, with Docker's `local` driver and the options,
// before the container that mounts it, because a container's create would make the volume
// without them. Docker keeps a volume's first driver and options: asked to create one that
// exists, it answers the existing volume and says nothing of options that differ. So an existing
// volume of that name is compared, and one made otherwise is refused with
// `volume_options_differ`, naming both and what to do, rather than mounted as it is.

import type { MountSpec } from '../resources/spec/service-spec.ts';

/** A volume as the runtime holds it. */
export interface VolumeState {
  driver: string;
  /** The options it was created with (none: {}). */
  options: Record<string, string>;
}

/** The code a task's failure starts with when a volume of its name exists with another driver or options. */
export const volumeOptionsDiffer = 'volume_options_differ';

/** The named volumes of a container's mounts that carry options: name to options (one entry per volume). */
export function volumesWithOptions(mounts: readonly MountSpec[]): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>();
  for (const m of mounts) if (m.type === 'volume' && m.volumeOptions !== undefined && !out.has(m.source)) out.set(m.source, m.volumeOptions);
  return out;
}

function sameOptions(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/** Shown in a message: `type=nfs o=addr=10.0.0.5,rw device=:/export`, or `no options`. */
export function describeOptions(options: Readonly<Record<string, string>>): string {
  const keys = Object.keys(options).sort();
  return keys.length === 0 ? 'no options' : keys.map((k) => `${k}=${options[k] ?? ''}`).join(' ');
}

/**
 * Why an existing volume cannot serve as the one wanted (`volume_options_differ: ...`, with what
 * to do), or null when it was made with the local driver and exactly these options.
 */
export function volumeMismatch(name: string, wanted: Readonly<Record<string, string>>, existing: VolumeState): string | null {
  if (existing.driver === 'local' && sameOptions(wanted, existing.options)) return null;
  const was = existing.driver === 'local' ? describeOptions(existing.options) : `the driver ${existing.driver} (${describeOptions(existing.options)})`;
  return `${volumeOptionsDiffer}: the volume ${name} exists on this node with ${was}, and the service asks for ${describeOptions(wanted)}; `
    + 'Docker keeps a volume\'s first options, so the task is not started with the wrong storage. '
    + `Remove the volume on this node once no container uses it (docker volume rm ${name}) and the task starts with a new one, or name another volume`;
}
