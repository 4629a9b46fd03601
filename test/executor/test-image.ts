// The image Docker tests run: Debian's static busybox (package busybox-static, /bin/busybox)
// alone in a root filesystem, with a symlink per applet (sh, sleep, true, false, echo, ...),
// imported with `docker import` (POST /images/create?fromSrc=-) as shoal-test/busybox:local, the
// way `shoal dev demo-image` makes its image (src/executor/busybox-image.ts).
// Tests never pull from a registry: there is none on CI, and pulls would make them slow and
// flaky. Building is idempotent (an image already there is left alone) and takes a second.

import Docker from 'dockerode';
import { ensureBusyboxImage, imageExists } from '../../src/executor/busybox-image.ts';
import { defaultSocketPath } from './dockerd.ts';

export const testImage = 'shoal-test/busybox:local';

/**
 * Makes sure `shoal-test/busybox:local` exists (importing it when absent) and that each of
 * `extraTags` (full references, `repo:tag`) names it too. Returns the image reference.
 */
export async function ensureTestImage(extraTags: readonly string[] = [], socketPath = defaultSocketPath): Promise<string> {
  const docker = new Docker({ socketPath });
  await ensureBusyboxImage(docker, testImage);
  for (const ref of extraTags) {
    if (await imageExists(docker, ref)) continue;
    const at = ref.lastIndexOf(':');
    await docker.getImage(testImage).tag({ repo: ref.slice(0, at), tag: ref.slice(at + 1) });
  }
  return testImage;
}

/** Removes a tag made by ensureTestImage (the image itself stays while another tag names it). */
export async function removeTestTag(ref: string, socketPath = defaultSocketPath): Promise<void> {
  const docker = new Docker({ socketPath });
  try {
    await docker.getImage(ref).remove({ noprune: true });
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 404) throw err;
  }
}
