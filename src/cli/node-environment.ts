// The environment a node runs with when shoal starts it: the systemd unit `shoal install` writes
// and the nodes of `shoal dev` (docs/operations.md, "The memory allocator").
//
// The memory allocator. Node.js allocates its buffers (array buffers, TLS records, the write
// path's encoded entries) with the C library's malloc. glibc's keeps the pages of blocks freed in
// the middle of its heap until a malloc_trim that Node never calls: after a burst of writes a
// node held 90-120 MiB of its main heap with a few MiB of live buffers in it, for good
// (bench/RESULTS.md, "Memory after 100,000 documents"). jemalloc gives freed pages back after a
// decay time. It is loaded with LD_PRELOAD when installed (Debian and Raspberry Pi OS:
// `apt-get install libjemalloc2`), with two arenas (a node has one busy thread; the default, four
// per core, holds more memory idle) and freed pages returned after a second. Without it a node
// runs on the C library's malloc, as before.

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { UsageError } from './args.ts';

/** jemalloc's settings for a node (MALLOC_CONF). */
export const jemallocConf = 'narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0';
/** Two cores or fewer: one V8 helper thread (docs/operations.md, the NODE_OPTIONS advice). */
export const smallMachineNodeOptions = '--v8-pool-size=1';

export type Allocator = 'auto' | 'jemalloc' | 'system';
export const allocators: readonly Allocator[] = ['auto', 'jemalloc', 'system'];

/** Debian's multiarch folder of each architecture Node.js runs on where shoal does. */
const multiarch: Partial<Record<NodeJS.Architecture, string>> = {
  x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu', arm: 'arm-linux-gnueabihf', riscv64: 'riscv64-linux-gnu', ppc64: 'powerpc64le-linux-gnu', s390x: 's390x-linux-gnu',
};

/** The jemalloc shared library of this machine's architecture, if installed (libjemalloc.so.2). */
export function findJemalloc(arch: NodeJS.Architecture = process.arch, exists: (p: string) => boolean = existsSync): string | undefined {
  const triplet = multiarch[arch];
  const dirs = [...(triplet !== undefined ? [`/usr/lib/${triplet}`, `/lib/${triplet}`] : []), '/usr/lib64', '/usr/lib', '/usr/local/lib'];
  return dirs.map((d) => path.join(d, 'libjemalloc.so.2')).find((f) => exists(f));
}

export interface NodeEnvironmentOptions {
  allocator: Allocator;
  /** NODE_OPTIONS ('' for none); default: smallMachineNodeOptions with two cores or fewer. */
  nodeOptions?: string | undefined;
  cpus: number;
  /** The jemalloc library found (findJemalloc()), injected by tests. */
  jemalloc: string | undefined;
}

/**
 * The variables of the allocator: LD_PRELOAD with MALLOC_CONF for jemalloc ('auto': when found),
 * none for the C library's. 'jemalloc' when it is not installed is a usage error that says how to
 * install it.
 */
export function allocatorEnvironment(allocator: Allocator, jemalloc: string | undefined): Record<string, string> {
  if (allocator === 'system' || (allocator === 'auto' && jemalloc === undefined)) return {};
  if (jemalloc === undefined) {
    throw new UsageError("--allocator jemalloc: libjemalloc.so.2 is not installed on this machine; install it (Debian, Raspberry Pi OS: 'apt-get install libjemalloc2') or give --allocator system");
  }
  return { LD_PRELOAD: jemalloc, MALLOC_CONF: jemallocConf };
}

/** The variables to set for a node: NODE_OPTIONS when there are any, and the allocator's. */
export function nodeEnvironment(o: NodeEnvironmentOptions): Record<string, string> {
  const nodeOptions = o.nodeOptions ?? (o.cpus <= 2 ? smallMachineNodeOptions : '');
  return { ...(nodeOptions !== '' ? { NODE_OPTIONS: nodeOptions } : {}), ...allocatorEnvironment(o.allocator, o.jemalloc) };
}

/** Which allocator an environment from nodeEnvironment() selects (for messages and --json). */
export function allocatorOf(env: Record<string, string>): 'jemalloc' | 'system' {
  return env.LD_PRELOAD !== undefined ? 'jemalloc' : 'system';
}

/**
 * The allocator this process runs on, from its mappings (/proc/self/maps): jemalloc when the
 * library is mapped, else the C library's; undefined where there is no /proc (not Linux).
 */
export function allocatorInUse(maps: () => string = () => readFileSync('/proc/self/maps', 'utf8')): 'jemalloc' | 'system' | undefined {
  let text: string;
  try {
    text = maps();
  } catch {
    return undefined;
  }
  return /\/libjemalloc\.so[.\d]*$/m.test(text) ? 'jemalloc' : 'system';
}

/** The start line that says which allocator the node runs on, and how to change it. */
export function allocatorLine(inUse: 'jemalloc' | 'system' | undefined): string | undefined {
  if (inUse === undefined) return undefined;
  return inUse === 'jemalloc'
    ? `memory allocator: jemalloc (MALLOC_CONF=${process.env.MALLOC_CONF ?? 'its defaults'})`
    : "memory allocator: the C library's malloc; jemalloc gives back the memory a burst of writes leaves: install it ('apt-get install libjemalloc2') and run the node as 'shoal install' does (docs/operations.md, \"The memory allocator\")";
}
