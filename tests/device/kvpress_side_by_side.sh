#!/usr/bin/env bash
# tests/device/kvpress_side_by_side.sh — kvaudit and kvpress's own pipeline on the same SmolLM2 cells,
# on the same machine: outputs compared cell by cell, needle recoveries and cells per second for both.
#
#   kvpress_side_by_side.sh stage KVAUDIT_BINARY [--python PY] [--gguf PATH]
#       On the development machine (Debian 12). Writes .device/side/ (git-ignored; a later
#       `tests/device/check.sh build` keeps .device/side/):
#         wheels/     what the GPU image lacks for kvpress 0.5.5: kvpress 0.5.5, transformers 5.2.0
#                     (kvpress wants <5.3; the image has 5.17), tokenizers 0.22.2 (5.2 wants <=0.23.0;
#                     the image has 0.23.2), gguf 0.19.0 (transformers loads the GGUF with it),
#                     cachetools, requests, urllib3 (imported by `import kvpress`), accelerate and
#                     psutil (transformers needs accelerate to load a GGUF) — for CPython 3.12;
#         stubs/      `datasets` and `fire`: kvpress imports them at `import kvpress` for presses not
#                     used here (DuoAttention's and ExpectedAttentionStats' calibration); the real
#                     `datasets` pulls pyarrow and pandas (~60 MB). Used only where the module is absent;
#                     calling them raises;
#         kvaudit-bundle.tar.xz   KVAUDIT_BINARY (debug info stripped) with every shared library it
#                     and its Open MPI components load, except glibc's and CUDA's (libcuda, cuBLAS,
#                     cudart come from the GPU machine), the Open MPI components a singleton
#                     `kvaudit run` loads (lib/openmpi3/), Open MPI's help files (share/openmpi/) and
#                     a wrapper `kvaudit` that sets LD_LIBRARY_PATH, OPAL_PREFIX,
#                     OMPI_MCA_mca_base_component_path and OMPI_MCA_ess_singleton_isolated=1 (a world
#                     of one without forking `orted`, so neither orted nor PMIx is needed);
#         model-part-{1,2,3}      (beside it, .device/side-model/) the GGUF in three transfers.
#       Prints every size; exits 1 if .device/side/ exceeds 33 MiB (one transfer with the repository).
#
#   kvpress_side_by_side.sh stash FILE...
#       On the GPU machine: copies carried files (the model parts) to /tmp/kvaudit-side/ so that a
#       later call (while the machine stays warm) finds them.
#
#   kvpress_side_by_side.sh run [--kvaudit PATH] [--gguf PATH] [--device cpu|cuda] [--python PY]
#                               [--tasks a,b] [--instances N] [--length L] [--seed S]
#                               [--press knorm|snapkv|streaming_llm|tova] [--compression R]
#                               [--dtype f32|bf16] [--chat-template chatml] [--threads T]
#                               [--wheels DIR] [--isolate]
#       1. `kvaudit generate ruler` writes the instances (RULER, seed S, length L, N per task);
#       2. a study of the same cells — full KV and the press at compression R, query-aware and
#          query-agnostic, sdpa, dtype f32 (cpu) or bf16 (cuda: the CUDA backend computes in bf16
#          only; an f32 model would silently run on the CPU) — is planned and run by `kvaudit run`
#          as one process (an MPI world of one) with --device;
#       3. kvpress 0.5.5's KVPressTextGenerationPipeline answers the same four cells per instance
#          (the GGUF loaded by transformers at the same dtype, sdpa): query-agnostic = the pipeline's
#          `question` argument, query-aware = context + question as the context and question "";
#          full KV = press None;
#       4. prints, per cell, whether the two outputs are identical (both when they differ), then the
#          identical / total counts per cell type and protocol, the needle recoveries of each side,
#          the prompt token counts of both sides, and cells per second of each side's generation
#          part (kvaudit: the units' time from its records, t_start..t_end, model load included;
#          kvpress: the pipeline calls, model load excluded) beside each process's wall time.
#       --kvaudit: a kvaudit binary, the staged bundle (.tar.xz, unpacked to /tmp/kvaudit-side/) or
#       an unpacked bundle directory; default .device/side/kvaudit-bundle.tar.xz if present, else
#       build/kvaudit. --gguf: default models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf,
#       else the three model parts joined from /tmp/kvaudit-side/ (stashed) or .device/side-model/
#       (sha256 checked against tests/golden/smollm2/reference.json). tests/device/check.sh carries
#       an 8-block cut of the model instead, which this comparison does not use. --python: the Python with torch (default python3); when
#       it cannot import kvpress, the wheels (--wheels, default .device/side/wheels) are installed
#       with pip --no-index --no-deps into /tmp/kvaudit-side/site and put first on PYTHONPATH, and
#       the stubs added for modules it lacks. The comparison reads the shards with h5py (this Python
#       if it has h5py, else python3 or /usr/bin/python3). Defaults: tova at 0.5, tasks
#       niah_single_1,niah_single_2,niah_multikey_1, 4 instances per task, length 512, seed 42,
#       threads 1 on the cpu and nproc on cuda (OMP_NUM_THREADS and torch's threads).
#       --isolate (rehearsal on the development machine, root): every kvaudit command runs in a
#       private mount namespace where /usr/lib/x86_64-linux-gnu holds glibc only (Open MPI, PMIx,
#       HDF5… hidden), /usr/share/openmpi and /etc/openmpi are empty and /usr/bin/orted is
#       /dev/null, under `env -i`: the bundle alone must carry it, as on the GPU machine.
#       Logs and results go to $OUT if set, else .device/side-out (emptied first).
#
# On the development machine (CPU rehearsal; the venv of tools/golden/requirements-kvpress.txt):
#   tests/device/kvpress_side_by_side.sh stage build/kvaudit
#   tests/device/kvpress_side_by_side.sh run --kvaudit .device/side/kvaudit-bundle.tar.xz --isolate \
#       --device cpu --python tools/.venv-kvpress/bin/python --tasks niah_single_1,niah_single_2 --instances 2
# On the GPU machine, with the device tool (the tree takes ~27 MB of a call's 64 MiB; a model part
# is 33 MB, .device/side/ 24.6 MiB with the CPU build's binary, so the parts travel first, each call
# while the machine is still warm from the one before; give the last call a timeout_s of 600). The
# model parts and the run take about 3-4 minutes of device time beside the machine's start, more
# than what a session that also runs tests/device/check.sh (540 s) has left of its 15 minutes:
#   tests/device/kvpress_side_by_side.sh stage build-device/kvaudit        (here, first)
#   carry [".device/side-model/model-part-1"] command: bash tests/device/kvpress_side_by_side.sh stash .device/side-model/model-part-1
#   carry [".device/side-model/model-part-2"] command: bash tests/device/kvpress_side_by_side.sh stash .device/side-model/model-part-2
#   carry [".device/side-model/model-part-3"] command: bash tests/device/kvpress_side_by_side.sh stash .device/side-model/model-part-3
#   carry [".device/side"] command: bash tests/device/kvpress_side_by_side.sh run --device cuda
# See docs/design/kvpress_side_by_side.md.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"
side=.device/side
side_model=.device/side-model
tmp=/tmp/kvaudit-side
default_gguf=models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
limit_bytes=$((33 * 1024 * 1024))
# Libraries that stay on the target: glibc's, and CUDA's (driver, runtime, cuBLAS).
system_libs='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libmvec|ld-linux-x86-64|libcuda|libcudart|libcublas|libcublasLt|libnvidia-[a-z-]+)\.so'
# The Open MPI 4.1 components a singleton `kvaudit run` with ess_singleton_isolated opens (strace of
# build/kvaudit, 2026-12-07), less the ones that need absent libraries or are never selected for one
# process (mtl psm/psm2, pml cm, the monitoring wrappers, btl tcp/sm, reachable netlink).
ompi_components=(allocator_basic allocator_bucket bml_r2 btl_self btl_vader coll_adapt coll_basic
  coll_han coll_inter coll_libnbc coll_self coll_sm coll_sync coll_tuned errmgr_default_app
  ess_singleton mpool_hugepage op_avx osc_rdma osc_sm pmix_isolated pml_ob1 rcache_grdma
  reachable_weighted schizo_ompi schizo_orte shmem_mmap shmem_posix shmem_sysv state_app)
ompi_pkglib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
wheels=(kvpress==0.5.5 transformers==5.2.0 tokenizers==0.22.2 gguf==0.19.0 cachetools==5.5.2
  requests==2.34.2 urllib3==2.8.0 accelerate==1.15.0 psutil==7.2.2)

die() { echo "kvpress_side_by_side.sh: $*" >&2; exit 1; }
size_of() { du -sb "$1" | cut -f1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# ---------------------------------------------------------------------------------------------- stage
stage() {
  local binary=${1:-} py=python3 gguf=$default_gguf
  [ -n "$binary" ] || die "usage: stage KVAUDIT_BINARY [--python PY] [--gguf PATH]"
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --python) py=$2; shift 2 ;;
      --gguf) gguf=$2; shift 2 ;;
      *) die "stage: unknown option $1" ;;
    esac
  done
  [ -x "$binary" ] || die "stage: $binary is not an executable"
  [ -d "$ompi_pkglib" ] || die "stage: $ompi_pkglib missing (Open MPI 4.1 of Debian 12 expected)"
  set -e
  rm -rf "$side" && mkdir -p "$side/wheels" "$side/stubs/datasets" "$side/stubs/fire"

  echo "== wheels (CPython 3.12, x86-64)"
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$side/wheels" "${wheels[@]}"
  cat >"$side/stubs/datasets/__init__.py" <<'EOF'
# Stub staged by tests/device/kvpress_side_by_side.sh: kvpress imports `load_dataset` at import time
# for DuoAttentionPress's and ExpectedAttentionStatsPress's calibration, which the side-by-side never
# runs. The real package (with pyarrow and pandas) is too large for the transfer.
def load_dataset(*args, **kwargs):
    raise ImportError("datasets is a stub here (tests/device/kvpress_side_by_side.sh)")
EOF
  cat >"$side/stubs/fire/__init__.py" <<'EOF'
# Stub staged by tests/device/kvpress_side_by_side.sh: kvpress imports `fire` at import time for a
# command-line entry point the side-by-side never runs.
def Fire(*args, **kwargs):
    raise ImportError("fire is a stub here (tests/device/kvpress_side_by_side.sh)")
EOF

  echo "== kvaudit bundle of $binary"
  local b=$side/bundle
  mkdir -p "$b/bin" "$b/lib/openmpi3" "$b/share"
  cp "$binary" "$b/bin/kvaudit" && strip --strip-debug "$b/bin/kvaudit"
  local objects=("$binary") c
  for c in "${ompi_components[@]}"; do
    [ -f "$ompi_pkglib/mca_$c.so" ] || die "stage: $ompi_pkglib/mca_$c.so missing"
    cp "$ompi_pkglib/mca_$c.so" "$b/lib/openmpi3/"
    objects+=("$ompi_pkglib/mca_$c.so")
  done
  local o missing
  for o in "${objects[@]}"; do
    missing=$(ldd "$o" | awk '/not found/ {print $1}' | grep -Ev "$system_libs" || true)
    [ -z "$missing" ] || die "stage: $o needs libraries not found here: $missing"
    ldd "$o" | awk '/=> \// {print $3}' | while read -r lib; do
      basename "$lib" | grep -Eq "$system_libs" || cp -nL "$lib" "$b/lib/"
    done
  done
  strip --strip-unneeded "$b"/lib/*.so* "$b"/lib/openmpi3/*.so 2>/dev/null || true
  cp -r /usr/share/openmpi "$b/share/openmpi"
  cat >"$b/kvaudit" <<'EOF'
#!/bin/sh
# kvaudit with its own shared libraries and Open MPI components (tests/device/kvpress_side_by_side.sh).
# A singleton `kvaudit run` is an MPI world of one; ess_singleton_isolated keeps Open MPI from
# forking orted (and so from needing PMIx): it uses the pmix "isolated" component instead.
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$here"
export OMPI_MCA_mca_base_component_path="$here/lib/openmpi3"
export OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_btl_base_warn_component_unused=0
exec "$here/bin/kvaudit" "$@"
EOF
  chmod +x "$b/kvaudit"
  {
    echo "source: $(readlink -f "$binary")"
    echo "sha256: $(sha256sum "$binary" | cut -d' ' -f1)"
    echo "staged: $(date -u +%FT%TZ) on $(cat /proc/sys/kernel/hostname)"
    echo "newest glibc symbol needed: $(cat "$b/bin/kvaudit" "$b"/lib/*.so* "$b"/lib/openmpi3/*.so |
      grep -aoE 'GLIBC_2\.[0-9]+' | sort -Vu | tail -1)"
    echo "libraries:"; (cd "$b/lib" && ls -1 *.so* | sed 's/^/  /')
  } >"$b/STAGED.txt"
  # Smoke test (CUDA's libraries from /usr/local/cuda here when the binary links them).
  if ! LD_LIBRARY_PATH=/usr/local/cuda/lib64 "$b/kvaudit" version >"$side/version.txt" 2>&1; then
    echo "  warning: $b/kvaudit version failed here:"; sed 's/^/    /' "$side/version.txt"
  fi
  mv "$side/version.txt" "$b/VERSION.txt"
  tar -C "$side" -cf - bundle | xz -T1 -6 >"$side/kvaudit-bundle.tar.xz"
  echo "  bundle uncompressed $(mib "$(size_of "$b")"): bin $(mib "$(size_of "$b/bin")"), lib $(mib "$(size_of "$b/lib")") ($(find "$b/lib" -maxdepth 1 -name '*.so*' | wc -l) libraries, ${#ompi_components[@]} MCA components)"
  rm -rf "$b"

  if [ -f "$gguf" ]; then
    mkdir -p "$side_model"
    if ! cmp -s <(cat "$side_model"/model-part-{1,2,3} 2>/dev/null) "$gguf"; then
      rm -f "$side_model"/model-part-*
      split -n 3 --numeric-suffixes=1 -a 1 "$gguf" "$side_model/model-part-"
    fi
  else
    echo "  $gguf absent: no model parts (the GPU machine must already have the GGUF)"
  fi
  set +e
  echo "== sizes"
  (cd "$side" && find . -type f -printf '%s\t%p\n' | sort -k2 | awk -F'\t' '{printf "  %10d  %s\n", $1, $2}')
  [ -d "$side_model" ] && (cd "$side_model" && find . -type f -printf '  %s  model %p (a transfer each)\n' | sort -k3)
  local total
  total=$(size_of "$side")
  echo "  total $side: $total bytes ($(mib "$total")): wheels $(mib "$(size_of "$side/wheels")"), stubs $(size_of "$side/stubs") bytes, bundle $(mib "$(stat -c %s "$side/kvaudit-bundle.tar.xz")")"
  [ "$total" -le "$limit_bytes" ] || die "stage: $side is $(mib "$total"), over the 33 MiB a transfer leaves"
}

stash() {
  [ $# -gt 0 ] || die "usage: stash FILE..."
  mkdir -p "$tmp"
  local f
  for f in "$@"; do
    [ -f "$f" ] || die "stash: $f missing (carry it)"
    cp "$f" "$tmp/" && echo "stashed $(basename "$f") ($(stat -c %s "$tmp/$(basename "$f")") bytes) in $tmp"
  done
}

# ------------------------------------------------------------------------------------------------ run
find_gguf() {  # prints the GGUF to use, joining stashed parts if needed
  local d want have
  for d in "$default_gguf" "$tmp/smollm2.gguf"; do
    [ -f "$d" ] && { echo "$d"; return 0; }
  done
  for d in "$tmp" "$side_model"; do
    if [ -f "$d/model-part-1" ] && [ -f "$d/model-part-2" ] && [ -f "$d/model-part-3" ]; then
      mkdir -p "$tmp"
      cat "$d"/model-part-{1,2,3} >"$tmp/smollm2.gguf"
      want=$(python3 -c "import json;print(json.load(open('tests/golden/smollm2/reference.json'))['model_file_sha256'])")
      have=$(sha256sum "$tmp/smollm2.gguf" | cut -d' ' -f1)
      [ "$want" = "$have" ] || { rm -f "$tmp/smollm2.gguf"; echo "joined parts from $d: sha256 $have != $want" >&2; return 1; }
      echo "$tmp/smollm2.gguf"; return 0
    fi
  done
  return 1
}

run() {
  local kvaudit_arg="" gguf="" device=cpu py=python3 tasks=niah_single_1,niah_single_2,niah_multikey_1
  local instances=4 length=512 seed=42 press=tova compression=0.5 dtype="" template=chatml threads=""
  local wheel_dir="" isolate=0
  while [ $# -gt 0 ]; do
    case $1 in
      --kvaudit) kvaudit_arg=$2; shift 2 ;;
      --gguf) gguf=$2; shift 2 ;;
      --device) device=$2; shift 2 ;;
      --python) py=$2; shift 2 ;;
      --tasks) tasks=$2; shift 2 ;;
      --instances) instances=$2; shift 2 ;;
      --length) length=$2; shift 2 ;;
      --seed) seed=$2; shift 2 ;;
      --press) press=$2; shift 2 ;;
      --compression) compression=$2; shift 2 ;;
      --dtype) dtype=$2; shift 2 ;;
      --chat-template) template=$2; shift 2 ;;
      --threads) threads=$2; shift 2 ;;
      --wheels) wheel_dir=$2; shift 2 ;;
      --isolate) isolate=1; shift ;;
      *) die "run: unknown option $1 (see the header of $0)" ;;
    esac
  done
  case $device in cpu|cuda) ;; *) die "run: --device cpu|cuda" ;; esac
  case $press in knorm|snapkv|streaming_llm|tova) ;; *) die "run: --press knorm|snapkv|streaming_llm|tova" ;; esac
  [ -n "$dtype" ] || { [ "$device" = cuda ] && dtype=bf16 || dtype=f32; }
  [ -n "$threads" ] || { [ "$device" = cuda ] && threads=$(nproc) || threads=1; }
  [ "$device" = cuda ] && [ "$dtype" != bf16 ] && echo "warning: the CUDA backend computes in bf16 only; kvaudit runs this $dtype model on the CPU" >&2
  local out=${OUT:-$here/.device/side-out}
  mkdir -p "$out" "$tmp" && rm -rf "${out:?}"/*
  local t_all=$SECONDS
  exec 3>&1 4>&2 > >(tee "$out/side_by_side.log") 2>&1
  local tee_pid=$!

  # kvaudit: a binary, or the bundle (tarball or directory) with its wrapper.
  [ -n "$kvaudit_arg" ] || { [ -f "$side/kvaudit-bundle.tar.xz" ] && kvaudit_arg=$side/kvaudit-bundle.tar.xz || kvaudit_arg=build/kvaudit; }
  local kv
  if [[ $kvaudit_arg == *.tar.xz ]]; then
    rm -rf "$tmp/bundle" && tar -C "$tmp" -xJf "$kvaudit_arg" || die "run: cannot unpack $kvaudit_arg"
    kv=$tmp/bundle/kvaudit
  elif [ -d "$kvaudit_arg" ]; then
    kv=$(readlink -f "$kvaudit_arg")/kvaudit
  else
    kv=$(readlink -f "$kvaudit_arg")
  fi
  [ -x "$kv" ] || die "run: $kv is not executable"
  local extra_libs=""
  if [ "$device" = cuda ]; then  # cuBLAS and cudart from the machine's CUDA toolkit (as check.sh)
    extra_libs=$( (ls -d /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib 2>/dev/null;
      find / -xdev \( -name 'libcublasLt.so.13*' -o -name 'libcudart.so.13*' \) -printf '%h\n' 2>/dev/null) | sort -u | paste -sd:)
  fi
  local glibc_dir=$tmp/glibc-only empty_dir=$tmp/empty
  if [ "$isolate" = 1 ]; then
    [ -f "$tmp/bundle/kvaudit" ] && [ "$kv" = "$tmp/bundle/kvaudit" ] || die "run: --isolate needs the staged bundle (--kvaudit .../kvaudit-bundle.tar.xz)"
    command -v unshare >/dev/null && command -v dpkg >/dev/null || die "run: --isolate needs unshare and dpkg"
    rm -rf "$glibc_dir" "$empty_dir" && mkdir -p "$glibc_dir" "$empty_dir"
    dpkg -L libc6 | grep -E '^/(usr/)?lib/x86_64-linux-gnu/[^/]+$' | xargs -I{} cp -a {} "$glibc_dir/"
  fi
  kvrun() {  # kvaudit "$@", isolated with --isolate
    if [ "$isolate" = 1 ]; then
      unshare -m sh -c '
        set -e
        for d in /usr/share/openmpi /etc/openmpi; do [ ! -d $d ] || mount --bind "$1" $d; done
        [ -e /usr/bin/orted ] && mount --bind /dev/null /usr/bin/orted
        mount --bind "$2" /usr/lib/x86_64-linux-gnu
        shift 2; exec "$@"' sh "$empty_dir" "$glibc_dir" \
        /usr/bin/env -i PATH=/usr/bin:/bin HOME="$HOME" OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=passive \
        ${extra_libs:+LD_LIBRARY_PATH="$extra_libs"} "$kv" "$@"
    else
      OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=passive OMPI_MCA_ess_singleton_isolated=1 \
        LD_LIBRARY_PATH="${extra_libs}${extra_libs:+${LD_LIBRARY_PATH:+:}}${LD_LIBRARY_PATH:-}" "$kv" "$@"
    fi
  }

  if [ -z "$gguf" ]; then gguf=$(find_gguf) || die "run: no GGUF: pass --gguf, or stash the model parts"; fi
  gguf=$(readlink -f "$gguf")
  [ -f "$gguf" ] || die "run: $gguf missing"

  echo "== set-up"
  echo "date: $(date -u +%FT%TZ)  host: $(cat /proc/sys/kernel/hostname)  cores: $(nproc)  device: $device  dtype: $dtype  threads: $threads"
  [ "$device" = cuda ] && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "kvaudit: $kv$([ "$isolate" = 1 ] && echo ' (isolated: glibc only, Open MPI/PMIx hidden, env -i)')"
  echo "model: $gguf"
  echo "cells: $press at compression $compression and full KV x query-aware, query-agnostic x sdpa; tasks $tasks, $instances instances each, length $length, seed $seed"
  kvrun version 2>&1 | grep -iE '^(kvaudit|version|git|mpi|cuda|hdf5|build)' | head -8 | sed 's/^/  /'

  # Python: kvpress, from the staged wheels when this Python lacks it.
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1
  if ! "$py" -c "import kvpress" >/dev/null 2>&1; then
    [ -n "$wheel_dir" ] || wheel_dir=$side/wheels
    ls "$wheel_dir"/*.whl >/dev/null 2>&1 || die "run: $py cannot import kvpress and $wheel_dir has no wheels (stage first)"
    rm -rf "$tmp/site" "$tmp/stubs" && mkdir -p "$tmp/stubs"
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$tmp/site" "$wheel_dir"/*.whl ||
      die "run: pip could not install $wheel_dir"
    local m stubs=""
    for m in datasets fire; do
      if ! "$py" -c "import $m" >/dev/null 2>&1 && [ -d "$(dirname "$wheel_dir")/stubs/$m" ]; then
        cp -r "$(dirname "$wheel_dir")/stubs/$m" "$tmp/stubs/" && stubs+=" $m"
      fi
    done
    export PYTHONPATH="$tmp/site:$tmp/stubs${PYTHONPATH:+:$PYTHONPATH}"
    echo "python: installed $(ls "$wheel_dir"/*.whl | wc -l) wheels into $tmp/site; stubs:${stubs:- none}"
  fi
  if [ "$device" = cpu ] && [ -z "${ONEDNN_MAX_CPU_ISA:-}" ] && grep -q amx_tile /proc/cpuinfo; then
    export ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16  # AMX instructions die with SIGILL on some VMs
  fi
  "$py" -c "import sys, torch, transformers, tokenizers, kvpress, gguf; from importlib.metadata import version as v
print('python', sys.version.split()[0], '| torch', torch.__version__, '| transformers', transformers.__version__,
      '| tokenizers', tokenizers.__version__, '| kvpress', v('kvpress'), '| gguf', v('gguf'),
      '| cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0))" 2>&1 | grep -v Warning | grep -v 'warnings.warn' ||
    die "run: $py cannot import torch, transformers, kvpress and gguf"
  local hpy=""
  for p in "$py" python3 /usr/bin/python3; do
    "$p" -c "import h5py" >/dev/null 2>&1 && { hpy=$p; break; }
  done
  [ -n "$hpy" ] || die "run: no Python with h5py for reading the shards"

  echo "== kvaudit: instances, plan, run"
  local inst=$out/instances.jsonl study=$out/study manifest=$out/side.toml
  kvrun generate ruler --model "$gguf" --length "$length" --tasks "$tasks" --instances "$instances" \
    --seed "$seed" --chat-template "$template" --out "$inst" >"$out/generate_ruler.log" 2>&1 ||
    { cat "$out/generate_ruler.log"; die "run: kvaudit generate ruler failed"; }
  local task_list
  task_list=$(echo "$tasks" | sed 's/[^,]*/"&"/g; s/,/, /g')
  cat >"$manifest" <<EOF
# Written by tests/device/kvpress_side_by_side.sh: the cells kvpress's pipeline also answers.
[study]
name = "kvpress-side-by-side"
seed = $seed
output_dir = "$study"
description = "kvaudit vs kvpress 0.5.5 on the same cells ($press, compression $compression, $dtype, $device)"

[[models]]
name = "smollm2"
path = "$gguf"
format = "gguf"
chat_template = "$template"
dtype = "$dtype"

[[benchmarks]]
name = "ruler"
kind = "ruler"
tasks = [$task_list]
length = $length
instances = $instances
essay = "builtin"

[methods.$press]

[[grids]]
name = "side"
benchmarks = ["ruler"]
methods = ["$press"]
compression = [$compression]
protocols = ["query-aware", "query-agnostic"]
attention_backends = ["sdpa"]
EOF
  kvrun plan "$manifest" >"$out/plan.log" 2>&1 || { cat "$out/plan.log"; die "run: kvaudit plan failed"; }
  grep -E '^ *cells|units' "$out/plan.log" | head -3 | sed 's/^/  /'
  local t0 kv_wall kv_rc
  t0=$(now)
  kvrun run "$manifest" --device "$device" >"$out/kvaudit_run.log" 2>&1
  kv_rc=$?
  kv_wall=$(since "$t0")
  grep -E 'device|summary|recorded|error|warning' "$out/kvaudit_run.log" | head -12 | sed 's/^/  /'
  echo "  kvaudit run: exit $kv_rc, wall $kv_wall s"

  echo "== kvpress: KVPressTextGenerationPipeline on the same instances"
  write_kvpress_py "$out/kvpress_side.py"
  local kp_wall kp_rc
  t0=$(now)
  OMP_NUM_THREADS=$threads "$py" "$out/kvpress_side.py" --instances "$inst" --gguf "$gguf" --press "$press" \
    --compression "$compression" --device "$device" --dtype "$dtype" --threads "$threads" \
    --out "$out/kvpress.jsonl" 2> >(grep -v -E 'RequestsDependencyWarning|warnings.warn\(' >&2)
  kp_rc=$?
  kp_wall=$(since "$t0")
  echo "  kvpress side: exit $kp_rc, wall $kp_wall s"

  echo "== side by side"
  write_compare_py "$out/compare.py"
  "$hpy" "$out/compare.py" --instances "$inst" --shards "$study/shards" --kvpress "$out/kvpress.jsonl" \
    --press "$press" --kvaudit-wall "$kv_wall" --kvpress-wall "$kp_wall" --summary "$out/summary.json"
  local cmp_rc=$?
  echo "== done in $((SECONDS - t_all)) s; logs and results in $out"
  exec 1>&3 2>&4 3>&- 4>&-
  wait "$tee_pid" 2>/dev/null
  [ "$kv_rc" = 0 ] && [ "$kp_rc" = 0 ] && [ "$cmp_rc" = 0 ]
}

write_kvpress_py() {
  cat >"$1" <<'EOF'
"""kvpress 0.5.5's own pipeline on the instances of `kvaudit generate ruler` (tests/device/kvpress_side_by_side.sh).

Per instance four cells, in kvpress's terms (tools/kvpress_pipeline_check.py): full KV and the press,
each query-agnostic (the pipeline's `question`) and query-aware (context + question as the context,
question ""). One JSON line per cell: the answer, the seconds of the pipeline call and the prompt's
token counts as the pipeline splits it (context ids, question ids).
"""
import argparse
import json
import os
import time

import torch
from kvpress import KnormPress, SnapKVPress, StreamingLLMPress, TOVAPress
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
from transformers.utils import logging as hf_logging

hf_logging.disable_progress_bar()
PRESSES = {"knorm": KnormPress, "snapkv": SnapKVPress, "streaming_llm": StreamingLLMPress, "tova": TOVAPress}

ap = argparse.ArgumentParser()
for k in ("instances", "gguf", "press", "compression", "device", "dtype", "threads", "out"):
    ap.add_argument("--" + k, required=True)
a = ap.parse_args()
torch.set_num_threads(int(a.threads))
dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[a.dtype]
sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

t0 = time.perf_counter()
d, f = os.path.split(a.gguf)
model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=dtype, attn_implementation="sdpa")
model.to(a.device).eval()
tokenizer = AutoTokenizer.from_pretrained(d, gguf_file=f)
pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer, device=a.device)
sync()
load_s = time.perf_counter() - t0
print("  model loaded in %.1f s (%s, %s, sdpa, eos %s)" % (load_s, a.device, a.dtype,
      model.generation_config.eos_token_id), flush=True)

instances = [json.loads(line) for line in open(a.instances)]
gen_s = 0.0
with open(a.out, "w") as out, torch.inference_mode():
    out.write(json.dumps({"kind": "meta", "load_s": load_s, "device": a.device, "dtype": a.dtype,
                          "torch": torch.__version__}) + "\n")
    for x in instances:
        common = dict(answer_prefix=x["answer_prefix"], max_new_tokens=x["max_new_tokens"])
        line = []
        for method in ("full", a.press):
            for protocol in ("query-agnostic", "query-aware"):
                if protocol == "query-agnostic":
                    context, question = x["context"], x["question"]
                else:
                    context, question = x["context"] + x["question"], ""
                press = None if method == "full" else PRESSES[a.press](compression_ratio=float(a.compression))
                pre = pipe.preprocess(context, questions=[question], answer_prefix=x["answer_prefix"],
                                      max_context_length=int(1e10))
                sync()
                t = time.perf_counter()
                answer = pipe(context, question=question, press=press, **common)["answer"]
                sync()
                dt = time.perf_counter() - t
                gen_s += dt
                out.write(json.dumps({"kind": "cell", "task": x["task"], "index": x["index"], "method": method,
                                      "protocol": protocol, "answer": answer, "seconds": dt,
                                      "n_context_ids": int(pre["context_ids"].shape[1]),
                                      "n_question_ids": int(pre["questions_ids"][0].shape[1])}) + "\n")
                out.flush()
                line.append("%s/%s %.1fs" % (method, protocol.replace("query-", ""), dt))
        print("  %s %d: %s" % (x["task"], x["index"], ", ".join(line)), flush=True)
    out.write(json.dumps({"kind": "end", "generation_s": gen_s}) + "\n")
print("  %d cells in %.1f s of pipeline calls" % (4 * len(instances), gen_s))
EOF
}

write_compare_py() {
  cat >"$1" <<'EOF'
"""Pairs kvaudit's records with kvpress's answers by (task, instance, method, protocol) and prints the comparison."""
import argparse
import glob
import json
import os

import h5py

ap = argparse.ArgumentParser()
for k in ("instances", "shards", "kvpress", "press", "kvaudit-wall", "kvpress-wall", "summary"):
    ap.add_argument("--" + k, required=True)
a = ap.parse_args()

instances = {(x["task"], x["index"]): x for x in map(json.loads, open(a.instances))}
kp, kp_meta, kp_gen = {}, {}, float("nan")
for r in map(json.loads, open(a.kvpress) if os.path.exists(a.kvpress) else []):
    if r["kind"] == "cell":
        kp[(r["task"], r["index"], r["method"], r["protocol"])] = r
    elif r["kind"] == "meta":
        kp_meta = r
    elif r["kind"] == "end":
        kp_gen = r["generation_s"]

def names(dt):  # HDF5 enum member -> name (the records number them in their own order: docs/RECORDS.md)
    return {v: k for k, v in h5py.check_enum_dtype(dt).items()}

kv, units, steps, devices, failed = {}, {}, 0.0, {}, []
shards = sorted(glob.glob(a.shards + "/part-*.h5"))
for path in shards:
    with h5py.File(path, "r") as f:
        d = f["records"]
        proto, dev, stat = names(d.dtype["protocol"]), names(d.dtype["device"]), names(d.dtype["status"])
        for r in d[:]:
            s = lambda k: r[k].decode() if isinstance(r[k], bytes) else r[k]
            method = "full" if s("method_id") == "full" else s("method")
            key = (s("task"), int(r["instance"]), method, proto[r["protocol"]])
            if stat[r["status"]] != "ok":
                failed.append("%s: %s %s" % (key, stat[r["status"]], s("error")[:200]))
            kv[key] = {"output": s("output"), "score": float(r["score"]), "n_prompt": int(r["n_prompt_tokens"]),
                       "n_context": int(r["n_context_tokens"]), "n_question": int(r["n_question_tokens"])}
            units[int(r["unit_id"])] = (int(r["t_end_ns"]) - int(r["t_start_ns"])) / 1e9
            for c in ("cell_prefill_ms", "cell_capture_ms", "cell_extra_pass_ms", "cell_select_ms",
                      "cell_evict_ms", "cell_feed_ms", "cell_decode_ms"):
                if r[c] == r[c]:
                    steps += float(r[c]) / 1e3
            devices[dev[r["device"]]] = devices.get(dev[r["device"]], 0) + 1

def found(x, out):  # the needle check of tools/kvpress_pipeline_check.py (RULER's string_match_all at 1)
    return all(v.lower() in out.lower() for v in x["answers"])

cells = [(m, p) for m in ("full", a.press) for p in ("query-aware", "query-agnostic")]
same = {c: 0 for c in cells}
total = {c: 0 for c in cells}
rec_kv = {c: 0 for c in cells}
rec_kp = {c: 0 for c in cells}
ws_only, missing, tok_mismatch = 0, [], []
print("%-16s %3s  %-26s %-4s  %s" % ("task", "idx", "cell", "same", "kvaudit output | kvpress output"))
for (task, idx), x in sorted(instances.items()):
    for m, p in cells:
        key = (task, idx, m, p)
        if key not in kv or key not in kp:
            missing.append("%s: %s" % (key, "kvaudit" if key not in kv else "kvpress"))
            continue
        o1, o2 = kv[key]["output"], kp[key]["answer"]
        eq = o1 == o2
        total[(m, p)] += 1
        same[(m, p)] += eq
        ws_only += (not eq) and o1.strip() == o2.strip()
        rec_kv[(m, p)] += found(x, o1)
        rec_kp[(m, p)] += found(x, o2)
        shown = "%r" % o1[:40] if eq else "%r | %r" % (o1[:40], o2[:40])
        print("%-16s %3d  %-26s %-4s  %s" % (task, idx, "%s %s" % (m, p), "yes" if eq else "NO", shown))
        # Prompt tokens: kvaudit counts prefix+context | question | suffix+answer prefix; kvpress
        # tokenizes question + suffix + answer prefix as one string (docs/design/protocols.md).
        if p == "query-agnostic" and m == "full":
            n_kp = kp[key]["n_context_ids"] + kp[key]["n_question_ids"]
            if n_kp != kv[key]["n_prompt"] or kp[key]["n_context_ids"] != kv[key]["n_context"]:
                tok_mismatch.append("%s %d: kvaudit context %d + question %d = %d, kvpress context %d + question %d = %d"
                                    % (task, idx, kv[key]["n_context"], kv[key]["n_question"], kv[key]["n_prompt"],
                                       kp[key]["n_context_ids"], kp[key]["n_question_ids"], n_kp))

n_cells = sum(total.values())
print()
print("outputs identical (kvaudit = kvpress, character for character):")
for c in cells:
    print("  %-6s %-15s %d/%d" % (c[0], c[1], same[c], total[c]))
print("  all                    %d/%d%s" % (sum(same.values()), n_cells,
      "" if not ws_only else "  (%d more differ only in surrounding whitespace)" % ws_only))
print("needle recovered, kvaudit / kvpress (all answers in the output):")
for c in cells:
    print("  %-6s %-15s %d/%d   %d/%d" % (c[0], c[1], rec_kv[c], total[c], rec_kp[c], total[c]))
print("prompt tokens: %s" % ("kvaudit and kvpress agree on every instance (context, and context + question + suffix)"
                             if not tok_mismatch else "%d instance(s) differ:" % len(tok_mismatch)))
for t in tok_mismatch:
    print("  " + t)
unit_s = sum(units.values())
kv_cells = len(kv)
print("cells per second (each side's generation part; wall of the whole process in brackets):")
print("  kvaudit  %d cells in %.1f s of units = %.2f cells/s  (steps %.1f s; `kvaudit run` wall %.1f s; device %s)"
      % (kv_cells, unit_s, kv_cells / unit_s if unit_s else float("nan"), steps, float(a.kvaudit_wall),
         ", ".join("%s x%d" % kv_ for kv_ in sorted(devices.items()))))
kp_cells = len(kp)
print("  kvpress  %d cells in %.1f s of pipeline calls = %.2f cells/s  (model load %.1f s; process wall %.1f s; device %s, %s)"
      % (kp_cells, kp_gen, kp_cells / kp_gen if kp_gen else float("nan"), kp_meta.get("load_s", float("nan")),
         float(a.kvpress_wall), kp_meta.get("device"), kp_meta.get("dtype")))
if failed:
    print("kvaudit cells not ok: %d" % len(failed))
    for f_ in failed[:10]:
        print("  " + f_)
if missing:
    print("cells missing on one side: %d" % len(missing))
    for m_ in missing[:10]:
        print("  " + m_)
json.dump({"identical": {"%s %s" % c: [same[c], total[c]] for c in cells},
           "recovered_kvaudit": {"%s %s" % c: rec_kv[c] for c in cells},
           "recovered_kvpress": {"%s %s" % c: rec_kp[c] for c in cells},
           "whitespace_only_differences": ws_only, "prompt_token_mismatches": tok_mismatch,
           "kvaudit": {"cells": kv_cells, "unit_s": unit_s, "step_s": steps, "wall_s": float(a.kvaudit_wall),
                       "devices": devices, "shards": len(shards)},
           "kvpress": {"cells": kp_cells, "generation_s": kp_gen, "wall_s": float(a.kvpress_wall), **kp_meta},
           "failed": failed, "missing": missing}, open(a.summary, "w"), indent=1)
raise SystemExit(1 if failed or missing or not n_cells else 0)
EOF
}

case ${1:-} in
  stage) shift; stage "$@" ;;
  stash) shift; stash "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2 ;;
esac
