import { defineConfig } from 'vitest/config';

// test/gpu/* skip themselves where no CUDA device is usable; on the GPU machine they run with
// NN_ARENA_REQUIRE_GPU=1 (see README), which turns a missing device into a failure. The global
// setup builds the test addon (test/native/, never shipped) first.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/test-addon-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    poolOptions: { forks: { execArgv: ['--expose-gc'] } },
  },
});
