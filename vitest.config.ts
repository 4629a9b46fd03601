import { defineConfig } from 'vitest/config';

// Two groups, run one after the other: unit tests in parallel, then the system tests (real
// processes, clusters, Docker, network namespaces) one file at a time, since two clusters at
// once on two cores flap their elections.
const system = [
  'test/cluster/**/*.test.ts', 'test/faults/**/*.test.ts', 'test/cli/**/*.test.ts', 'test/bench/**/*.test.ts',
  'test/executor/docker-*.test.ts', 'test/system/**/*.test.ts', 'test/console/console-browser.test.ts', 'test/console/console-auth.test.ts',
  'test/net/mesh.test.ts', 'test/net/firewall.test.ts', 'test/net/overlay.test.ts',
  'test/net/ingress-mesh.test.ts',
  // Replicated volumes on real btrfs (loop devices, mounts): issue 41.
  'test/volumes/btrfs-*.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // $SHOAL_CONFIG in a fresh directory per file: no test reads or writes ~/.config/shoal.
    setupFiles: ['test/setup-env.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts', 'src/**/*.test.ts', 'fsm/**/*.test.ts', 'transport/**/*.test.ts'],
          exclude: system,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          include: system,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
