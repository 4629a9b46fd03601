// `npm run test:fuzz`: the property tests (*.fuzz.test.ts) with many runs each, rather than the
// few that `npm test` gives them. test/cluster/peer-fuzz.fuzz.test.ts starts shoal processes:
// run this under the machine-wide lock (flock /tmp/shoal-heavy.lock npm run test:fuzz).

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.fuzz.test.ts'],
    env: { SHOAL_FUZZ_RUNS: '100', SHOAL_FUZZ_SECONDS: '120' },
    testTimeout: 1_800_000,
    hookTimeout: 120_000,
    // One file at a time: the cluster tests must not compete with each other for the CPU.
    fileParallelism: false,
  },
});
