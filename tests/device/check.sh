#!/usr/bin/env bash
# tests/device/check.sh — the CUDA backend's check on a GPU machine (issue 8), in three steps.
#
#   tests/device/check.sh build     on the development machine (Debian 12 with tools/setup.sh's
#                                   packages): configures build-device/ (RelWithDebInfo as CI, -arch=sm_90), builds
#                                   the GPU test binaries and bench_cuda, and stages what the GPU
#                                   machine needs under .device/ (git-ignored): bundle.tar.xz (the
#                                   binaries + the non-system shared libraries they link; cuBLAS comes
#                                   from the GPU machine's CUDA toolkit) and model-part-{1,2,3} (the
#                                   SmolLM2 GGUF split so each transfer stays under the 64 MiB limit).
#   tests/device/check.sh stash N   on the GPU machine: keeps .device/model-part-N in /tmp/kvaudit-device.
#   tests/device/check.sh run       on the GPU machine: unpacks the bundle, joins the model parts
#                                   (sha256 checked against tests/golden/smollm2/reference.json), runs
#                                   every GPU test binary (kernels, attention, capture, model: CUDA vs
#                                   the CPU backend) and bench_cuda (ceilings, attention kernels,
#                                   prefill MFU at 8K/32K, batched decode), writes full logs to $OUT
#                                   (or .device/out) and prints a short table last.
# The GPU machine has CUDA but none of the Debian -dev packages the project builds against, hence
# the split: compile here with nvcc for sm_90, run there.
#
# With the device tool (run's carry names ignored paths; 64 MiB travel per call, the tree is ~13 MB):
#   one call, everything but SmolLM2 (its tests skip, saying the GGUF is absent):
#     carry [".device/bundle.tar.xz"]                          command: bash tests/device/check.sh run
#   everything (the 98 MB GGUF needs three transfers; each call within the 30 s the machine stays
#   warm after the previous one):
#     carry [".device/model-part-1"]                          command: bash tests/device/check.sh stash 1
#     carry [".device/model-part-2"]                          command: bash tests/device/check.sh stash 2
#     carry [".device/model-part-3", ".device/bundle.tar.xz"] command: bash tests/device/check.sh run
#   Give run a timeout_s of 600; the logs come back from $OUT (7 files).
# Environment (run): KVAUDIT_DEVICE_QUICK=1 → bench_cuda --quick; KVAUDIT_DEVICE_FILTER → gtest filter.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"
stage=.device
work=/tmp/kvaudit-device
binaries=(cuda_kernels_tests cuda_attention_tests cuda_capture_tests cuda_model_tests cuda_unit_runner_tests bench_cuda)
gguf=models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf

build() {
  set -e
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DKVAUDIT_WERROR=ON -DKVAUDIT_BUILD_TESTS=ON -DKVAUDIT_BUILD_BENCH=ON \
    "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc"
  cmake --build build-device -j "$(nproc)" --target "${binaries[@]}"
  rm -rf "$stage" && mkdir -p "$stage/bundle/bin" "$stage/bundle/lib"
  for b in "${binaries[@]}"; do
    path=$(find build-device -type f -name "$b" -perm -u+x | head -1)
    [ -n "$path" ] || { echo "check.sh: $b was not built" >&2; exit 1; }
    cp "$path" "$stage/bundle/bin/"
    strip --strip-debug "$stage/bundle/bin/$b"
    # Non-system libraries it links (glibc's and the CUDA driver/toolkit's stay on the machine).
    ldd "$path" | awk '/=> \//{print $3}' |
      grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcublas|libcublasLt|libcudart)\.so' |
      while read -r lib; do cp -nL "$lib" "$stage/bundle/lib/"; done
  done
  tar -C "$stage" -cJf "$stage/bundle.tar.xz" bundle && rm -rf "$stage/bundle"
  if [ -f "$gguf" ]; then
    split -n 3 --numeric-suffixes=1 -a 1 "$gguf" "$stage/model-part-"
  else
    echo "check.sh: $gguf absent (tools/fetch_default_model.sh); SmolLM2 checks will skip" >&2
  fi
  ls -la "$stage"
}

stash() {
  mkdir -p "$work"
  cp "$stage/model-part-$1" "$work/" && echo "check.sh: stashed model part $1 ($(stat -c %s "$work/model-part-$1") bytes)"
}

run() {
  out=${OUT:-$here/$stage/out}
  mkdir -p "$out" "$work"
  [ -f "$stage/bundle.tar.xz" ] || { echo "check.sh: $stage/bundle.tar.xz missing (run 'check.sh build' first)" >&2; exit 1; }
  rm -rf "$work/bundle" && tar -C "$work" -xJf "$stage/bundle.tar.xz"
  for i in 1 2 3; do [ -f "$stage/model-part-$i" ] && cp "$stage/model-part-$i" "$work/"; done
  model="$work/smollm2.gguf"
  if [ -f "$work/model-part-1" ] && [ -f "$work/model-part-2" ] && [ -f "$work/model-part-3" ]; then
    cat "$work/model-part-1" "$work/model-part-2" "$work/model-part-3" >"$model"
    want=$(python3 -c "import json;print(json.load(open('tests/golden/smollm2/reference.json'))['model_file_sha256'])")
    have=$(sha256sum "$model" | cut -d' ' -f1)
    if [ "$want" != "$have" ]; then echo "check.sh: joined GGUF sha256 $have != $want; SmolLM2 checks skip" >&2; rm -f "$model"; fi
  fi
  export KVAUDIT_SMOLLM2_GGUF="$model"
  export KVAUDIT_TINY_MODELS_DIR="$here/tests/golden/tiny_models"
  export KVAUDIT_SMOLLM2_GOLDEN_DIR="$here/tests/golden/smollm2"
  export KVAUDIT_TEST_DATA_DIR="$here/tests/golden"
  cublas_dirs=$( (ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null;
    find / -xdev -name 'libcublasLt.so.13*' -printf '%h\n' 2>/dev/null) | sort -u | paste -sd:)
  export LD_LIBRARY_PATH="$work/bundle/lib:$cublas_dirs:${LD_LIBRARY_PATH:-}"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} OMP_WAIT_POLICY=passive
  {
    date -u; nvidia-smi; nvcc --version 2>/dev/null | tail -1; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    for b in "${binaries[@]}"; do echo "== ldd $b"; ldd "$work/bundle/bin/$b" | grep -E 'not found|cublas' ; done
  } >"$out/machine.txt" 2>&1
  summary=()
  run_tests() {  # binary, time limit (s)
    local b=$1 limit=$2 start rc passed failed skipped
    start=$(date +%s)
    timeout "$limit" "$work/bundle/bin/$b" --gtest_color=no ${KVAUDIT_DEVICE_FILTER:+--gtest_filter="$KVAUDIT_DEVICE_FILTER"} >"$out/$b.log" 2>&1
    rc=$?
    passed=$(grep -c '^\[       OK \]' "$out/$b.log")
    failed=$(grep -c '^\[  FAILED  \].*(' "$out/$b.log")
    skipped=$(grep -c '^\[  SKIPPED \].*([0-9]* ms)$' "$out/$b.log")
    summary+=("| $b | exit $rc | $passed passed, $failed failed, $skipped skipped | $(($(date +%s) - start)) s |")
  }
  run_tests cuda_kernels_tests 120
  run_tests cuda_attention_tests 120
  run_tests cuda_capture_tests 120
  run_tests cuda_model_tests 240
  bench_args=()
  [ "${KVAUDIT_DEVICE_QUICK:-0}" = 1 ] && bench_args=(--quick)
  start=$(date +%s)
  timeout 240 "$work/bundle/bin/bench_cuda" "${bench_args[@]}" >"$out/bench_cuda.log" 2>&1
  rc=$?
  summary+=("| bench_cuda | exit $rc | | $(($(date +%s) - start)) s |")
  run_tests cuda_unit_runner_tests 240
  echo "== failures"
  grep -h -B2 -A12 'Failure$' "$out"/cuda_*_tests.log | head -150
  echo "== numbers"
  grep -h '^\[' "$out"/cuda_*_tests.log | grep -v '^\[ *\(RUN\|OK\|PASSED\|SKIPPED\|FAILED\) *\]\|^\[--\|^\[==' | head -200
  sed -n '/== summary/,$p' "$out/bench_cuda.log"
  echo "== table"
  printf '%s\n' "${summary[@]}"
}

case "${1:-}" in
  build) build ;;
  stash) stash "${2:?part number}" ;;
  run) run ;;
  *) sed -n '2,32p' "$0"; exit 1 ;;
esac
