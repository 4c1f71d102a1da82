// vitest's global setup: the test addon (build/Release/nn_arena_test.so; src/internal.ts) is
// built, or brought up to date, once before the tests (make compiles nothing when it is current).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export default function setup(): void {
  // Test hook: NN_ARENA_TEST_ADDON=prebuilt uses the .so sent along as it is (the GPU machine,
  // which runs a copy of a build made elsewhere and has no node-gyp toolchain to redo it).
  // NN_ARENA_TEST_ADDON=none: no test addon at all (scripts/ci-arm64.sh: the arm64 Node under
  // qemu-user cannot start the build's child process); tests that need it skip.
  if (process.env.NN_ARENA_TEST_ADDON === 'none') return;
  if (process.env.NN_ARENA_TEST_ADDON === 'prebuilt') {
    if (!existsSync('build/Release/nn_arena_test.so'))
      throw new Error('NN_ARENA_TEST_ADDON=prebuilt, but build/Release/nn_arena_test.so is missing: send it along');
    return;
  }
  // The compilers run without the sanitizer runtimes that npm run test:asan preloads for the tests
  // (the flags come from the build stamp, so the test addon is instrumented like the library).
  const { LD_PRELOAD: _, ...env } = process.env;
  const r = spawnSync(process.execPath, ['scripts/build-test-addon.cjs'], { stdio: 'inherit', env });
  if (r.status !== 0) throw new Error(`scripts/build-test-addon.cjs failed (exit ${r.status}): the tests that call test/native/ cannot run`);
}
