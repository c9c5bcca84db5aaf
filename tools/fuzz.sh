#!/usr/bin/env bash
# tools/fuzz.sh — build the libFuzzer targets with clang (ASan+UBSan) in build-fuzz/ and run each
# for SECONDS (default 60) starting from its committed corpus. Crashes are written to
# build-fuzz/fuzz-work/<target>/ and make the script fail. CI replays the corpus instead (ctest
# label fuzz); this is the longer run to do after changing a parser.
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]   (default: every target in fuzz/CMakeLists.txt)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
seconds=${1:-60}
shift || true
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKVAUDIT_FUZZ=ON -DKVAUDIT_ENABLE_CUDA=OFF -DKVAUDIT_BUILD_TESTS=OFF -DKVAUDIT_BUILD_BENCH=OFF
if [ $# -gt 0 ]; then
  targets=("$@")
else
  # Every target named in fuzz/CMakeLists.txt's set(kvaudit_fuzz_targets ...) line.
  read -r -a targets <<<"$(sed -n 's/^set(kvaudit_fuzz_targets \(.*\))$/\1/p' fuzz/CMakeLists.txt)"
fi
for target in "${targets[@]}"; do
  cmake --build build-fuzz --target "$target"
  work="build-fuzz/fuzz-work/$target"
  mkdir -p "$work/corpus"
  cp -n "fuzz/corpus/$target"/* "$work/corpus/" 2>/dev/null || true
  (cd "$work" && "$here/build-fuzz/fuzz/$target" -max_total_time="$seconds" -max_len=4096 corpus)
done
