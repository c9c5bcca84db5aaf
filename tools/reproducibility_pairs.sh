#!/usr/bin/env bash
# tools/reproducibility_pairs.sh — runs one study under several machine configurations and checks
# that every configuration records the same prompts, kept sets and outputs as the first, bit for
# bit (docs/RECORDS.md §Reproducibility). Each configuration is NAME:RANKS:ENV, ENV a
# comma-separated list of VAR=VALUE (may be empty); each run gets its own results directory under
# WORK, and `kvaudit inspect --diff` compares the first with each of the others.
#
#   tools/reproducibility_pairs.sh [--kvaudit BIN] [--manifest FILE] [--work DIR] [CONFIG...]
#
# Default configurations: the machine's best instruction-set level at 2 ranks and at 1 rank, and
# KVAUDIT_CPU_ISA=avx2 at 2 ranks (add e.g. scalar-2ranks:2:KVAUDIT_CPU_ISA=scalar, about 40 times
# slower, to compare the scalar level too). Default manifest:
# manifests/reproducibility-pairs.toml (440 cells). Exit 0 when every pair is 100 % identical,
# 1 when any pair differs (the differences are printed), 2 on bad usage, 77 (ctest SKIP) when the
# default manifest's model is absent. ctest: reproducibility_pairs (label slow).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kvaudit=$here/build/kvaudit
manifest=$here/manifests/reproducibility-pairs.toml
work=${TMPDIR:-/tmp}/kvaudit-reproducibility-pairs
configs=()
while [ $# -gt 0 ]; do
  case $1 in
    --kvaudit) kvaudit=$2; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "reproducibility_pairs: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done
if [ ${#configs[@]} -eq 0 ]; then
  configs=("best-2ranks:2:" "best-1rank:1:" "avx2-2ranks:2:KVAUDIT_CPU_ISA=avx2")
fi
if [ ! -x "$kvaudit" ]; then
  echo "reproducibility_pairs: $kvaudit is not an executable (build it, or give --kvaudit)" >&2
  exit 2
fi
if [ ! -f "$manifest" ]; then
  echo "reproducibility_pairs: manifest $manifest does not exist" >&2
  exit 2
fi
model=$here/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
if [ "$manifest" = "$here/manifests/reproducibility-pairs.toml" ] && [ ! -f "$model" ]; then
  echo "SKIP: the embedded default model $model is absent (tools/fetch_default_model.sh)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$work"
dirs=()
for config in "${configs[@]}"; do
  IFS=: read -r name ranks envs <<<"$config"
  if [ -z "$name" ] || ! [[ $ranks =~ ^[1-9][0-9]*$ ]]; then
    echo "reproducibility_pairs: configuration '$config' is not NAME:RANKS:ENV" >&2
    exit 2
  fi
  out=$work/$name
  rm -rf "$out"
  env_args=()
  mpi_env=(-x OMP_NUM_THREADS -x OMP_WAIT_POLICY)
  if [ -n "$envs" ]; then
    IFS=, read -r -a pairs <<<"$envs"
    for pair in "${pairs[@]}"; do
      env_args+=("$pair")
      mpi_env+=(-x "$pair")
    done
  fi
  start=$(date +%s)
  env "${env_args[@]}" "$kvaudit" plan "$manifest" --output-dir "$out" >"$work/$name.plan.log" 2>&1 || {
    echo "reproducibility_pairs: $name: kvaudit plan failed; see $work/$name.plan.log" >&2
    exit 1
  }
  env "${env_args[@]}" mpirun -np "$ranks" "${mpi_env[@]}" "$kvaudit" run "$manifest" \
    --output-dir "$out" >"$work/$name.run.log" 2>&1 || {
    echo "reproducibility_pairs: $name: kvaudit run failed; see $work/$name.run.log" >&2
    exit 1
  }
  # The evaluation order and level the shards record (provenance attribute blas_core).
  order=$(cat "$out"/shards/*.h5 | strings -n 8 | grep -m1 '^kvaudit-canonical' || true)
  echo "$name: ran in $(($(date +%s) - start)) s (${envs:-default environment}, $ranks rank(s));" \
    "shards record ${order:-no evaluation order}"
  dirs+=("$out")
done
status=0
for ((i = 1; i < ${#dirs[@]}; i++)); do
  log=$work/diff-$(basename "${dirs[0]}")-$(basename "${dirs[i]}").txt
  "$kvaudit" inspect --diff "${dirs[0]}" "${dirs[i]}" >"$log"
  echo "== $(basename "${dirs[0]}") vs $(basename "${dirs[i]}") ($log)"
  sed -n '3,$p' "$log" | head -24
  # A pair agrees when every cell is in both studies, ok in both, and none differs.
  if ! grep -q 'only in A: 0; only in B: 0$' "$log" || grep -q 'not compared' "$log" ||
    ! grep -q '^no compared cell differs$' "$log"; then
    status=1
  fi
done
exit "$status"
