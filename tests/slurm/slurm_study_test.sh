#!/usr/bin/env bash
# tests/slurm/slurm_study_test.sh — the slurm/ job scripts on a real local Slurm cluster.
#
# Starts munged + slurmctld + two emulated slurmd nodes with one fake GPU each
# (tests/slurm/local_cluster.sh; config in a temporary directory, nothing system-wide), then:
#   1. `sbatch --wait` propagates a job's exit code (the checks below rely on it);
#   2. `sbatch --test-only` accepts kvaudit.sbatch's resource shape (2 nodes × 1 rank, 1 GPU per
#      task) and refuses one the cluster cannot hold (3 nodes);
#   3. a tiny study (SmolLM2-135M-Instruct, RULER at 512 tokens, 2 units × a few cells): `kvaudit
#      plan`, then slurm/submit.sh --wait: `sbatch --wait slurm/kvaudit.sbatch` (2 ranks on 2 nodes
#      via `srun --mpi=pmix`, with `--gpus-per-task=1` of the template in force) and
#      slurm/reduce.sbatch chained with `--dependency=afterok`;
#   4. check_study.py (Debian python3 + h5py) checks the shards — every planned cell exactly once,
#      written by ranks 0 and 1 of a world of 2 under this Slurm job id — and the reduce report;
#      the job log and the environment capture are checked here.
# Every daemon it started is stopped by PID on exit (trap). Exit 0 pass, 1 fail, 77 skipped (with
# the reason printed): not root, Slurm/munge programs absent, or the GGUF model absent.
#
# Usage: slurm_study_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u -o pipefail
kv=$(realpath "$1")
src=$(realpath "$2")
work=$3
model=$src/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
debian_python=/usr/bin/python3

# shellcheck source=tests/slurm/local_cluster.sh
source "$src/tests/slurm/local_cluster.sh"

skip() {
  echo "SKIPPED: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs (this user is $(id -un))"
absent=$(cluster_missing_tools)
[ -z "$absent" ] || skip "Slurm/munge programs absent: $absent (tools/setup.sh installs them)"
[ -f "$model" ] || skip "the default model $model is absent (tools/fetch_default_model.sh)"

rm -rf "$work"
mkdir -p "$work"
work=$(realpath "$work")
# A short path: munged's socket path must fit in sockaddr_un (108 bytes).
run=$(mktemp -d /tmp/kvaudit-slurm.XXXXXX)
chmod 755 "$run"
failures=0
passed=0
finish() {
  cluster_stop "$run"
  if [ "$failures" -gt 0 ]; then
    mkdir -p "$work/cluster-logs"
    cp "$run"/*.log "$run"/*.out "$run"/slurm.conf "$work/cluster-logs/" 2>/dev/null
    echo "cluster logs kept in $work/cluster-logs"
  fi
  rm -rf "$run"
}
trap finish EXIT
check() {  # check NAME CMD...: runs CMD, counts it as passed or failed
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok: $name"
  else
    failures=$((failures + 1))
    echo "FAIL: $name" >&2
  fi
}
contains() { grep -qF -- "$2" "$1" || { echo "  '$1' lacks: $2" >&2; return 1; }; }

t_start=$(date +%s)
if ! cluster_start "$run" 2 1; then
  failures=$((failures + 1))
  echo "FAIL: the local cluster did not start" >&2
  exit 1
fi
passed=$((passed + 1))

# 1. Exit codes propagate through sbatch --wait.
(cd "$work" && sbatch --wait --quiet -N 1 -n 1 -o /dev/null --wrap 'exit 3')
check "sbatch --wait returns the job's exit code (3)" test "$?" = 3

# 2. The template's resource shape, checked by slurmctld without running anything.
sbatch_shape=(--nodes=2 --ntasks-per-node=1 --cpus-per-task=1)
check "sbatch --test-only accepts kvaudit.sbatch on 2 nodes" \
  sbatch --test-only "${sbatch_shape[@]}" "$src/slurm/kvaudit.sbatch" x y
refused() { ! sbatch --test-only "$@" 2>/dev/null; }
check "sbatch --test-only refuses 3 nodes" \
  refused --nodes=3 --ntasks-per-node=1 --cpus-per-task=1 "$src/slurm/kvaudit.sbatch" x y

# 3. The tiny study.
study=$work/study
mkdir -p "$study"
cat >"$study/tiny.toml" <<EOF
# Written by tests/slurm/slurm_study_test.sh: a few cells of RULER on SmolLM2 for the Slurm test.
[study]
name = "slurm-smoke"
seed = 7
output_dir = "out"

[[models]]
name = "smollm2-135m-instruct"
path = "$model"
format = "gguf"
chat_template = "chatml"
dtype = "f32"

[[benchmarks]]
name = "ruler-512"
kind = "ruler"
tasks = ["niah_single_1"]
length = 512
instances = 2
essay = "builtin"

[methods.knorm]
[methods.streaming_llm]

[[grids]]
name = "smoke"
benchmarks = ["ruler-512"]
methods = ["knorm", "streaming_llm"]
compression = [0.5]
protocols = ["query-agnostic"]
backends = ["sdpa"]
EOF
out=$study/out
(cd "$study" && bash "$src/slurm/submit.sh" --wait --kvaudit "$kv" \
  --run-sbatch "${sbatch_shape[*]} --time=00:10:00 --output=$work/run-%j.out" \
  --reduce-sbatch "--cpus-per-task=1 --time=00:10:00 --output=$work/reduce-%j.out" \
  --reduce-args "--no-figures" tiny.toml "$out" >"$work/submit.out" 2>"$work/submit.err")
submit_rc=$?
cat "$work/submit.err" "$work/submit.out"
check "submit.sh --wait: run and reduce jobs exit 0 (got $submit_rc)" test "$submit_rc" = 0
run_id=$(sed -n 's/^run \([0-9]*\)$/\1/p' "$work/submit.out")
reduce_id=$(sed -n 's/^reduce \([0-9]*\)$/\1/p' "$work/submit.out")
echo "run job ${run_id:-?}, reduce job ${reduce_id:-?}"
for f in "$work"/run-*.out "$work"/reduce-*.out; do
  [ -f "$f" ] && sed "s|^|  $(basename "$f"): |" "$f"
done
check "submit.sh printed both job ids" test -n "$run_id" -a -n "$reduce_id"
check "reduce chained after the run" test "${reduce_id:-0}" -gt "${run_id:-0}"
run_log=$work/run-$run_id.out
check "run log: 2 ranks launched with srun --mpi=pmix" contains "$run_log" "srun --mpi=pmix"
check "run log: kvaudit run exited 0" contains "$run_log" "kvaudit run exited 0"
check "environment captured" test -s "$out/jobs/job-$run_id.t0.txt"
check "environment capture has the job's GPU binding" \
  contains "$out/jobs/job-$run_id.t0.txt" "SLURM_GPUS_PER_TASK=1"
check "reduce log: kvaudit reduce exited 0" contains "$work/reduce-$reduce_id.out" \
  "kvaudit reduce exited 0"

# 4. Records and the report.
check "records and report (check_study.py)" \
  "$debian_python" "$src/tests/slurm/check_study.py" "$out" "$run_id" 2

echo "slurm study test: $(($(date +%s) - t_start)) s with the cluster up"
echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
