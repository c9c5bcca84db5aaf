#!/usr/bin/env bash
# tools/test.sh — the README's test command (and what .ci/run calls): installs everything with
# tools/setup.sh, builds warnings-as-errors, runs the whole ctest suite, then builds the parser,
# records and statistics tests with ASan+UBSan in a second, CPU-only build directory and runs them.
# Extra arguments are passed to both ctest runs (e.g. -R manifest).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
jobs=$(nproc)

KVAUDIT_CMAKE_ARGS="-DKVAUDIT_WERROR=ON -DKVAUDIT_ENABLE_CUDA=ON ${KVAUDIT_CMAKE_ARGS:-}" \
  bash tools/setup.sh --build-dir build
echo "== tests (build/)"
# Tests labelled `slow` (full-size end-to-end runs) are left to `ctest -L slow`.
ctest --test-dir build --output-on-failure -j "$jobs" -LE slow "$@"

KVAUDIT_CMAKE_ARGS="-DKVAUDIT_WERROR=ON ${KVAUDIT_CMAKE_ARGS:-}" \
  bash tools/setup.sh --sanitize --no-model --build-dir build-asan
echo "== sanitizer tests (build-asan/: ASan+UBSan; labels parser, records, statistics)"
# LeakSanitizer: Open MPI's MPI_Init keeps one-time allocations (kvaudit run initialises MPI); they
# are suppressed by tests/lsan_suppressions.txt. The CLI tests, which run `kvaudit run`, also set
# fast_unwind_on_malloc=0 (tests/cli/CMakeLists.txt) so those stacks reach MPI_Init.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  LSAN_OPTIONS=suppressions=$here/tests/lsan_suppressions.txt \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -L 'parser|records|statistics' -LE slow "$@"
