import { defineConfig } from 'vitest/config';

// npm run test:stall: the real-disk stall test (root, a loop device, fsfreeze). Not in npm test.
export default defineConfig({
  test: {
    include: ['test/**/*.stall.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
