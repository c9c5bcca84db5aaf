#!/usr/bin/env bash
# slurm/submit.sh — plans a kvaudit study (the preregistration lock) and submits its run job
# (kvaudit.sbatch) with the reduction (reduce.sbatch) chained by --dependency=afterok.
#
# usage: slurm/submit.sh [options] MANIFEST OUTPUT_DIR
#   --kvaudit BIN          the kvaudit binary (default: kvaudit on PATH); exported as KVAUDIT_BIN
#   --run-sbatch "OPTS"    extra sbatch options for the run job, e.g. "--nodes=4 --time=12:00:00"
#                          (or "--gpus-per-task=0" on a cluster without GPUs)
#   --run-args "OPTS"      extra `kvaudit run` options
#   --reduce-sbatch "OPTS" extra sbatch options for the reduce job
#   --reduce-args "OPTS"   extra `kvaudit reduce` options, e.g. "--no-figures"
#   --wait                 wait for both jobs (sbatch --wait) and exit with the run job's exit code
#                          if it failed, else with the reduce job's
# Prints the two job ids as "run JOBID" and "reduce JOBID" on stdout. OPTS strings are split on
# white space (no quoting inside). Exit codes: 0 submitted (or, with --wait, both jobs done), 1 bad
# arguments or a plan/submission failure, else the jobs' exit codes.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

kvaudit_bin=${KVAUDIT_BIN:-kvaudit}
run_sbatch="" run_args="" reduce_sbatch="" reduce_args="" wait_jobs=0
while [ $# -gt 0 ]; do
  case "$1" in
    --kvaudit) kvaudit_bin=$2; shift 2 ;;
    --run-sbatch) run_sbatch=$2; shift 2 ;;
    --run-args) run_args=$2; shift 2 ;;
    --reduce-sbatch) reduce_sbatch=$2; shift 2 ;;
    --reduce-args) reduce_args=$2; shift 2 ;;
    --wait) wait_jobs=1; shift ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "submit.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
    *) break ;;
  esac
done
if [ $# -ne 2 ]; then
  echo "submit.sh: expected MANIFEST OUTPUT_DIR (see --help)" >&2
  exit 1
fi
manifest=$1
output_dir=$2
command -v "$kvaudit_bin" >/dev/null 2>&1 || {
  echo "submit.sh: '$kvaudit_bin' is not an executable (use --kvaudit BIN)" >&2
  exit 1
}
KVAUDIT_BIN=$(command -v "$kvaudit_bin")
export KVAUDIT_BIN
read -r -a run_sbatch_opts <<<"$run_sbatch"
read -r -a run_opts <<<"$run_args"
read -r -a reduce_sbatch_opts <<<"$reduce_sbatch"
read -r -a reduce_opts <<<"$reduce_args"

# The lock: written once; re-planning the same manifest leaves it untouched, another is refused.
"$KVAUDIT_BIN" plan "$manifest" --output-dir "$output_dir" >&2

run_cmd=(sbatch --parsable "${run_sbatch_opts[@]}" "$here/kvaudit.sbatch" "$manifest" "$output_dir"
  "${run_opts[@]}")
reduce_cmd() {  # reduce_cmd RUN_ID: the reduce job's sbatch command, into the array `cmd`
  cmd=(sbatch --parsable --dependency="afterok:$1" --kill-on-invalid-dep=yes
    "${reduce_sbatch_opts[@]}" "$here/reduce.sbatch" "$output_dir" "${reduce_opts[@]}")
}

if [ "$wait_jobs" = 0 ]; then
  echo "submit.sh: ${run_cmd[*]}" >&2
  run_id=$("${run_cmd[@]}")
  run_id=${run_id%%;*}
  echo "run $run_id"
  reduce_cmd "$run_id"
  echo "submit.sh: ${cmd[*]}" >&2
  reduce_id=$("${cmd[@]}")
  echo "reduce ${reduce_id%%;*}"
  exit 0
fi

# --wait: sbatch --wait for the run job in the background (with --parsable it prints the job id as
# soon as the job is submitted), chain the reduction to that id while the run job is pending or
# running, then wait for both.
ids=$(mktemp)
trap 'rm -f "$ids"' EXIT
echo "submit.sh: sbatch --wait ${run_cmd[*]:1}" >&2
sbatch --wait "${run_cmd[@]:1}" >"$ids" &
run_waiter=$!
run_id=""
for _ in $(seq 1 300); do
  run_id=$(head -n 1 "$ids" | sed -n 's/^\([0-9][0-9]*\).*/\1/p')
  [ -n "$run_id" ] && break
  kill -0 "$run_waiter" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$run_id" ]; then
  set +e
  wait "$run_waiter"
  echo "submit.sh: the run job was not submitted (sbatch exited $?)" >&2
  exit 1
fi
echo "run $run_id"
reduce_cmd "$run_id"
echo "submit.sh: sbatch --wait ${cmd[*]:1}" >&2
set +e
reduce_out=$(sbatch --wait "${cmd[@]:1}")
reduce_rc=$?
wait "$run_waiter"
run_rc=$?
set -e
reduce_id=${reduce_out%%;*}
echo "reduce $reduce_id"
# sbatch --wait returns 0 for a job cancelled before it started (an unsatisfiable dependency), so
# ask slurmctld how the reduce job ended while it still remembers it (MinJobAge).
reduce_state=$(scontrol show job -o "$reduce_id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
if [ "$reduce_rc" = 0 ] && [ -n "$reduce_state" ] && [ "$reduce_state" != COMPLETED ]; then
  echo "submit.sh: reduce job $reduce_id ended $reduce_state without running" >&2
  reduce_rc=1
fi
echo "submit.sh: run job $run_id exited $run_rc; reduce job exited $reduce_rc" >&2
[ "$run_rc" = 0 ] || exit "$run_rc"
exit "$reduce_rc"
