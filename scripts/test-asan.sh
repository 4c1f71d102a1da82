#!/usr/bin/env bash
# npm run test:asan: the CPU test suite against an addon built with AddressSanitizer and
# UndefinedBehaviorSanitizer (CPU-only build: nvcc objects cannot be instrumented). Node itself
# is not instrumented, so the runtime is preloaded; leak detection is off because V8 keeps
# memory until exit by design. The normal build is restored afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
# Through install.cjs: offline (this Node's headers), and its build stamp records the flags, so the
# next install does not keep the ASan build as if it were the normal one.
build() { NN_ARENA_BUILD_FROM_SOURCE=1 node scripts/install.cjs 2>/dev/null; }
# The normal build, without the sanitizer flags (also when the sanitizer build failed midway).
restore() { echo "test:asan: restoring the normal build"; unset CFLAGS CXXFLAGS LDFLAGS NN_ARENA_CHECK_PRELOAD; build; }
trap restore EXIT
SAN_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:detect_odr_violation=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
export CXXFLAGS="$CFLAGS" LDFLAGS="-fsanitize=address,undefined"
# install.cjs checks that the new binary loads: under the sanitizer runtimes, like the tests.
NN_ARENA_CUDA=0 NN_ARENA_CHECK_PRELOAD="$SAN_PRELOAD" build
unset CFLAGS CXXFLAGS LDFLAGS
LD_PRELOAD="$SAN_PRELOAD" npx vitest run --exclude 'test/gpu/**' "$@"
