#!/usr/bin/env bash
# tests/device/check.sh — the CUDA backend's first-light check on a GPU machine, sized for one
# attempt: two calls of the device tool, each carrying at most 60 MiB (repository included), and
# one run of at most 540 s.
#
#   tests/device/check.sh build   here (Debian 12 with tools/setup.sh's packages): configures
#                                 build-device/ (RelWithDebInfo, -arch=sm_90), builds the GPU test
#                                 binaries and bench_cuda, and stages two calls under .device/
#                                 (git-ignored):
#                                   call-1/  bundle.tar.xz (the binaries and every shared library
#                                            they need but glibc's and CUDA's) + model part 1
#                                   call-2/  model part 2
#                                 The model is SmolLM2-135M-Instruct cut to its first
#                                 $KVAUDIT_DEVICE_BLOCKS (8) blocks by cut_gguf.py: the whole
#                                 98 MB GGUF cannot travel in two calls beside the 27 MB tree. It
#                                 prints each call's size (tree + carried) and refuses to stage a
#                                 call over 60 MiB; it checks that the bundled binaries resolve
#                                 every library from the bundle, glibc or CUDA (ldd in env -i).
#   tests/device/check.sh sizes   here: the two calls' sizes again (what `build` checked).
#   tests/device/check.sh stash   GPU machine, call 1: keeps call-1's files in /tmp/kvaudit-device.
#   tests/device/check.sh run     GPU machine, call 2 (also here, as a rehearsal: every GPU test
#                                 skips, saying why): joins the model (sha256 checked against the
#                                 build's), unpacks the bundle, runs each gtest suite of each binary
#                                 in its own process (a device-side trap sinks only its suite)
#                                 under per-binary time limits that add up to the 540 s deadline —
#                                 kernels, attention, capture, model, unit runner, then bench_cuda
#                                 --quick — and prints the table last, also when suites time out.
#                                 $OUT (or .device/out) receives summary.txt (the table),
#                                 machine.txt and logs.tar.gz (every suite's log).
#
# The device tool's calls (the second within 30 s of the first, while the machine is warm):
#   carry [".device/call-1"]   command: bash tests/device/check.sh stash      timeout_s 120
#   carry [".device/call-2"]   command: bash tests/device/check.sh run        timeout_s 600
# If the machine was given back between the calls, `run` says so in the table (model part 1
# missing) and the SmolLM2 tests skip; the rest still runs.
# Environment (run): KVAUDIT_DEVICE_FILTER → a gtest filter for every binary;
# KVAUDIT_DEVICE_DEADLINE → the run's deadline in seconds (540).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"
stage=.device
work=/tmp/kvaudit-device
gguf=models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
blocks=${KVAUDIT_DEVICE_BLOCKS:-8}
limit_bytes=$((60 * 1024 * 1024))
# Binary and its share of the deadline (s), in the order they run; bench_cuda last.
suites=(cuda_kernels_tests:60 cuda_attention_tests:60 cuda_capture_tests:70 cuda_model_tests:130
  cuda_unit_runner_tests:120 bench_cuda:70)
binaries=(); for s in "${suites[@]}"; do binaries+=("${s%%:*}"); done
# Libraries the GPU machine has: glibc's and the CUDA driver's / toolkit's.
system_libs='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso|libcuda|libcublas|libcublasLt|libcudart)\.so'

tree_bytes() {  # what the device tool sends besides the carried paths: tracked + untracked-not-ignored
  git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null |
    awk '{s += $1} END {print s + 0}'
}

sizes() {  # prints each call's size; fails if one is over the limit
  local tree call bytes status=0
  tree=$(tree_bytes)
  for call in call-1 call-2; do
    [ -d "$stage/$call" ] || { echo "check.sh: $stage/$call missing (run 'check.sh build')" >&2; return 1; }
    bytes=$(du -sb "$stage/$call" | cut -f1)
    awk -v c="${call#call-}" -v t="$tree" -v b="$bytes" 'BEGIN {
      printf "call %s: tree %.1f MiB + carried %.1f MiB = %.1f MiB (limit 60 MiB)\n", c,
        t / 1048576, b / 1048576, (t + b) / 1048576 }'
    if [ $((tree + bytes)) -gt "$limit_bytes" ]; then
      echo "check.sh: call ${call#call-} is over 60 MiB" >&2
      status=1
    fi
  done
  return $status
}

check_bundle_libraries() {  # every library of every bundled binary: bundle, glibc or CUDA
  local dir=$1 problems=0 b line name path
  for b in "$dir"/bin/*; do
    while read -r line; do
      name=$(awk '{print $1}' <<<"$line")
      path=$(awk '/=>/ {print $3}' <<<"$line")
      [[ $name =~ $system_libs ]] && continue
      [[ $line == *"statically linked"* ]] && continue
      if [[ $path != "$dir/lib/"* ]]; then
        echo "check.sh: $(basename "$b") needs $name from ${path:-nowhere} (not in the bundle)" >&2
        problems=$((problems + 1))
      fi
    done < <(env -i LD_LIBRARY_PATH="$dir/lib" ldd "$b" | sed 's/^\s*//' | grep -v '^/')
  done
  echo "check.sh: bundle libraries: $problems problem(s) (ldd with env -i LD_LIBRARY_PATH=bundle/lib)"
  [ "$problems" -eq 0 ]
}

build() {
  set -e
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DKVAUDIT_WERROR=ON -DKVAUDIT_BUILD_TESTS=ON -DKVAUDIT_BUILD_BENCH=ON -DCMAKE_EXE_LINKER_FLAGS=
  # No -static-libstdc++/-static-libgcc: a static unwinder beside the shared libraries' libgcc_s
  # aborts on any exception thrown inside a shared library (toml++, SentencePiece, Boost);
  # libstdc++ and libgcc_s travel in the bundle like the other libraries (glibc >= 2.36 there).
  cmake --build build-device -j "$(nproc)" --target "${binaries[@]}"
  rm -rf "$stage/call-1" "$stage/call-2" "$stage/bundle"
  mkdir -p "$stage/call-1" "$stage/call-2" "$stage/bundle/bin" "$stage/bundle/lib"
  for b in "${binaries[@]}"; do
    path=$(find build-device -type f -name "$b" -perm -u+x | head -1)
    [ -n "$path" ] || { echo "check.sh: $b was not built" >&2; exit 1; }
    cp "$path" "$stage/bundle/bin/"
    strip --strip-debug "$stage/bundle/bin/$b"
    ldd "$path" | awk '/=> \//{print $1, $3}' | while read -r name lib; do
      [[ $name =~ $system_libs ]] || cp -nL "$lib" "$stage/bundle/lib/"
    done
  done
  check_bundle_libraries "$here/$stage/bundle"
  tar -C "$stage" -cJf "$stage/call-1/bundle.tar.xz" bundle && rm -rf "$stage/bundle"
  if [ -f "$gguf" ]; then
    python3 tests/device/cut_gguf.py "$gguf" "$stage/smollm2-cut.gguf" --blocks "$blocks"
    sha256sum "$stage/smollm2-cut.gguf" | cut -d' ' -f1 >"$stage/call-1/model.sha256"
    # Two parts that even out the calls: call 1 also carries the bundle.
    local model_bytes bundle_bytes first
    model_bytes=$(stat -c %s "$stage/smollm2-cut.gguf")
    bundle_bytes=$(stat -c %s "$stage/call-1/bundle.tar.xz")
    first=$(((model_bytes + bundle_bytes) / 2 - bundle_bytes))
    [ "$first" -gt 0 ] || first=1
    head -c "$first" "$stage/smollm2-cut.gguf" >"$stage/call-1/model-part-1"
    tail -c +"$((first + 1))" "$stage/smollm2-cut.gguf" >"$stage/call-2/model-part-2"
    rm -f "$stage/smollm2-cut.gguf"
  else
    echo "check.sh: $gguf absent (tools/fetch_default_model.sh); the SmolLM2 checks will skip" >&2
  fi
  set +e
  ls -la "$stage/call-1" "$stage/call-2"
  sizes || { echo "check.sh: a call is over 60 MiB: nothing to carry (lower KVAUDIT_DEVICE_BLOCKS)" >&2
    rm -rf "$stage/call-1" "$stage/call-2"; exit 1; }
}

stash() {
  mkdir -p "$work"
  [ -d "$stage/call-1" ] || { echo "check.sh: $stage/call-1 not carried" >&2; exit 1; }
  cp "$stage"/call-1/* "$work/" && ls -la "$work"
}

run() {
  # start, out, logs and summary stay global: the EXIT trap (finish) reads them after run returns.
  local deadline
  start=$(date +%s)
  deadline=$((start + ${KVAUDIT_DEVICE_DEADLINE:-540}))
  out=${OUT:-$here/$stage/out}
  logs=$work/logs
  mkdir -p "$out" "$work" && rm -rf "$logs" && mkdir -p "$logs"
  summary=()
  table() {  # the table so far, to stdout and $OUT/summary.txt (rewritten after every step)
    { echo "== table ($(($(date +%s) - start)) s of ${KVAUDIT_DEVICE_DEADLINE:-540})"
      printf '%s\n' "${summary[@]}"; } | tee "$out/summary.txt"
  }
  finish() {
    tar -C "$work" -czf "$out/logs.tar.gz" logs 2>/dev/null
    echo "== failures"
    grep -h -B2 -A12 'Failure$' "$logs"/*.log 2>/dev/null | head -120
    echo "== numbers"
    grep -h '^\[' "$logs"/*.log 2>/dev/null |
      grep -v '^\[ *\(RUN\|OK\|PASSED\|SKIPPED\|FAILED\) *\]\|^\[--\|^\[==' | head -150
    sed -n '/== summary/,$p' "$logs/bench_cuda.log" 2>/dev/null
    table
  }
  trap finish EXIT
  for f in bundle.tar.xz model-part-1 model.sha256; do
    [ -f "$stage/call-1/$f" ] && [ ! -f "$work/$f" ] && cp "$stage/call-1/$f" "$work/"
  done
  [ -f "$stage/call-2/model-part-2" ] && cp "$stage/call-2/model-part-2" "$work/"
  if [ ! -f "$work/bundle.tar.xz" ]; then
    summary+=("| bundle | missing: call 1 (stash) did not reach this machine; nothing ran |")
    exit 1
  fi
  rm -rf "$work/bundle" && tar -C "$work" -xJf "$work/bundle.tar.xz"
  model="$work/smollm2-cut.gguf"
  rm -f "$model"
  if [ -f "$work/model-part-1" ] && [ -f "$work/model-part-2" ]; then
    cat "$work/model-part-1" "$work/model-part-2" >"$model"
    if [ "$(sha256sum "$model" | cut -d' ' -f1)" = "$(cat "$work/model.sha256")" ]; then
      summary+=("| model | SmolLM2-135M-Instruct, first $blocks blocks, sha256 checked |")
    else
      summary+=("| model | joined GGUF sha256 differs from the build's: SmolLM2 tests skip |")
      rm -f "$model"
    fi
  else
    summary+=("| model | part $([ -f "$work/model-part-1" ] && echo 2 || echo 1) missing (machine given back between the calls?): SmolLM2 tests skip |")
  fi
  export KVAUDIT_SMOLLM2_GGUF="$model"
  export KVAUDIT_TINY_MODELS_DIR="$here/tests/golden/tiny_models"
  export KVAUDIT_SMOLLM2_GOLDEN_DIR="$here/tests/golden/smollm2"
  export KVAUDIT_TEST_DATA_DIR="$here/tests/golden"
  # cuBLAS from the machine's CUDA toolkit, under /usr/local/cuda* only.
  cublas_dirs=$(ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib 2>/dev/null | paste -sd:)
  export LD_LIBRARY_PATH="$work/bundle/lib${cublas_dirs:+:$cublas_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} OMP_WAIT_POLICY=passive
  {
    date -u; nvidia-smi 2>&1; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    for b in "${binaries[@]}"; do echo "== ldd $b"; ldd "$work/bundle/bin/$b" | grep -E 'not found|cublas|cuda'; done
  } >"$out/machine.txt" 2>&1
  [ -n "$cublas_dirs" ] || summary+=("| cuBLAS | no /usr/local/cuda*/lib64: the GPU binaries cannot start |")

  local entry b share budget_end suite suite_list rc passed failed skipped timed_out
  for entry in "${suites[@]}"; do
    b=${entry%%:*}
    share=${entry##*:}
    budget_end=$(($(date +%s) + share))
    [ "$budget_end" -gt "$deadline" ] && budget_end=$deadline
    if [ "$b" = bench_cuda ]; then
      local left=$((budget_end - $(date +%s)))
      if [ "$left" -lt 5 ]; then summary+=("| bench_cuda | not run: the deadline was reached |"); table >/dev/null; continue; fi
      local t0; t0=$(date +%s)
      timeout -k 5 "$left" "$work/bundle/bin/bench_cuda" --quick >"$logs/bench_cuda.log" 2>&1
      rc=$?
      summary+=("| bench_cuda --quick | exit $rc$([ $rc = 124 ] && echo ' (time limit)') | | $(($(date +%s) - t0)) s |")
      table >/dev/null
      continue
    fi
    # One process per gtest suite (a trap leaves a sticky error only in its own process).
    # "Suite.Test" per line (the filter applied), then one process per suite with its tests.
    local tests
    tests=$("$work/bundle/bin/$b" --gtest_list_tests ${KVAUDIT_DEVICE_FILTER:+--gtest_filter="$KVAUDIT_DEVICE_FILTER"} 2>"$logs/$b.list.log" |
      awk '/^[^ ]/ {suite = $1; next} {print suite $1}')
    suite_list=$(sed 's/\.[^.]*$//' <<<"$tests" | awk 'NF && !seen[$0]++')
    passed=0 failed=0 skipped=0 timed_out=0
    local not_run=0 crashed=0 count=0 t0; t0=$(date +%s)
    [ -n "$suite_list" ] || summary+=("| $b | no tests listed: see $b.list.log (did it start?) |")
    for suite in $suite_list; do
      count=$((count + 1))
      local left=$((budget_end - $(date +%s)))
      if [ "$left" -lt 2 ]; then not_run=$((not_run + 1)); continue; fi
      local log="$logs/$b.${suite//\//_}.log"
      local filter
      filter=$(grep -F "$suite." <<<"$tests" | awk -v s="$suite." 'index($0, s) == 1' | paste -sd:)
      timeout -k 5 "$left" "$work/bundle/bin/$b" --gtest_color=no --gtest_filter="$filter" >"$log" 2>&1
      rc=$?
      passed=$((passed + $(grep -c '^\[       OK \]' "$log")))
      failed=$((failed + $(grep -c '^\[  FAILED  \].*(' "$log")))
      skipped=$((skipped + $(grep -c '^\[  SKIPPED \].*([0-9]* ms)$' "$log")))
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then timed_out=$((timed_out + 1))
      elif [ "$rc" -ne 0 ] && ! grep -q '^\[  FAILED  \]' "$log"; then crashed=$((crashed + 1)); fi
    done
    summary+=("| $b | $passed passed, $failed failed, $skipped skipped | suites: $((count - not_run)) run, $timed_out timed out, $crashed crashed, $not_run not run (time) | $(($(date +%s) - t0)) s |")
    table >/dev/null
  done
}

case "${1:-}" in
  build) build ;;
  sizes) sizes ;;
  stash) stash ;;
  run) run ;;
  *) sed -n '2,37p' "$0"; exit 1 ;;
esac
