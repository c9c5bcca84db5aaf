#!/usr/bin/env bash
# End-to-end test of sequential calibration in `kvaudit run` (manifest `sequential = true`;
# docs/design/sequential.md §Run side), on a tiny HF model made here: one sequential
# certification block (violation risk, fixed sequence, knorm at three budgets) and one fixed-n
# block that shares knorm@0.25's cells (never dropped). With this model no candidate loses more
# than τ = 0.5 of the full-KV utility, so every loss is 0 and, at ε = 0.9, δ = 0.2, the tests
# certify after a few of the n_max = 16 requests (the check asserts a decision before n_max).
#   * `mpirun -np 2 kvaudit run` exits 0, writes <output_dir>/sequential/seqc.json with each
#     candidate's decision and requests used, and the shards lack exactly the dropped cells: the
#     calibration cells of knorm@0.5 and knorm@0.75 after the waves that ran (at most one wave —
#     world size − 1 positions — past the decision), never knorm@0.25's, full KV's or test cells;
#     the run's summary counts them as not needed.
#   * a second launch (resume) runs nothing, exits 0 and leaves the decisions file unchanged;
#   * one process (waves of one unit) reaches byte-identical decisions and runs exactly the
#     requests used;
#   * `kvaudit reduce` replays the same decisions (certification_candidates.csv) and reports the
#     selected policy, the requests used and the compute saved (certification.csv); every cell it
#     calls missing is a dropped one;
#   * a launch stopped by SIGUSR1 during the waves (exit 3) and resumed on 3 ranks reaches the
#     decisions of one uninterrupted process.
# Usage: sequential_run_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_model_cli_test "$1" "$2" "$3"

make_tiny_hf_model "$work/tiny"
write_study() {  # write_study FILE OUTPUT_DIR
  {
    tiny_ruler_study_head "$2" sequential 7 12
    cat <<TOML
[methods.knorm]

[[grids]]
name = "g"
benchmarks = ["r"]
methods = ["knorm"]
compression = [0.25, 0.5, 0.75]
protocols = ["query-agnostic"]
attention_backends = ["sdpa"]

[[certification]]
name = "seqc"
grid = "g"
benchmark = "r"
method = "knorm"
protocol = "query-agnostic"
attention_backend = "sdpa"
candidates = [0.25, 0.5, 0.75]
tau = 0.5
epsilon = 0.9
delta = 0.2
calibration = 8
test = 4
sequential = true

[[certification]]
name = "fixed"
grid = "g"
benchmark = "r"
method = "knorm"
protocol = "query-agnostic"
attention_backend = "sdpa"
candidates = [0.25]
tau = 0.5
epsilon = 0.9
delta = 0.2
calibration = 8
test = 4
TOML
  } >"$1"
}
write_study "$work/a.toml" "$work/a"
write_study "$work/b.toml" "$work/b"
mpi=(mpirun -np 2 -x OMP_NUM_THREADS)

check "plan a" expect_rc 0 "$kv" plan "$work/a.toml"
check "run a (mpirun -np 2)" expect_rc 0 "${mpi[@]}" "$kv" run "$work/a.toml"
cp "$work/err.txt" "$work/run-a.txt"
check "run a: sequential phase announced" contains "$work/run-a.txt" \
  "sequential calibration of 1 certification run(s) first, in waves of 2 unit(s)"
check "run a: decisions published" contains "$work/run-a.txt" \
  "sequential decisions written to $work/a/sequential/seqc.json"
check "decisions file exists" test -f "$work/a/sequential/seqc.json"
check "no file for the fixed-n block" test ! -e "$work/a/sequential/fixed.json"

# The decisions, and the shards against them: sequential-check.py OUTPUT_DIR RUN_STDERR WORLD_SIZE.
cat >"$work/sequential-check.py" <<'PY'
import glob, json, re, sys
import h5py
out, log, world = sys.argv[1], open(sys.argv[2]).read(), int(sys.argv[3])
d = json.load(open(out + "/sequential/seqc.json"))
assert d["block"] == "seqc" and len(d["plans"]) == 1, d
plan = d["plans"][0]
assert plan["finished"] and plan["n_max"] == 16 and plan["model"] == "tiny", plan
cands = plan["candidates"]
assert [c["id"] for c in cands] == ["knorm@0.25", "knorm@0.5", "knorm@0.75"], cands
for c in cands:
    assert c["decision"] in ("certified", "not_certifiable", "undecided"), c
    assert 1 <= c["requests_used"] <= 16, c
decided = [c for c in cands if c["decision"] != "undecided" and c["requests_used"] < 16]
assert decided, ("no candidate decided before n_max", cands)
splits = json.load(open(out + "/prereg.json"))["splits"]["r"]
def split_of(task, instance):
    return "calibration" if instance in splits[task]["calibration"] else "test"
count = {}
for path in sorted(glob.glob(out + "/shards/part-*.h5")):
    with h5py.File(path, "r") as f:
        for r in f["records"][()]:
            task = r["task"].decode()
            method = r["method"].decode()
            key = (split_of(task, int(r["instance"])), method,
                   "full" if method == "full" else "%g" % float(r["compression"]))
            count[key] = count.get(key, 0) + 1
            assert r["status"] == 0, r
# Full KV, the test split and knorm@0.25 (the fixed-n block needs it) are complete.
assert count.pop(("calibration", "full", "full")) == 16, count
assert count.pop(("test", "full", "full")) == 8, count
for budget in ("0.25", "0.5", "0.75"):
    assert count.pop(("test", "knorm", budget)) == 8, (budget, count)
assert count.pop(("calibration", "knorm", "0.25")) == 16, count
# knorm@0.5 and @0.75: the positions the waves issued, within one wave past the decision.
dropped = 0
for budget, c in (("0.5", cands[1]), ("0.75", cands[2])):
    ran = count.pop(("calibration", "knorm", budget))
    used = c["requests_used"]
    assert used <= ran <= min(16, used + world - 1), (budget, ran, used)
    assert ran % world == 0 or ran == 16, (budget, ran)
    dropped += 16 - ran
assert not count, count
assert dropped > 0, "nothing was dropped"
m = re.search(r"\(\+ (\d+) not needed: dropped by sequential calibration", log)
assert m and int(m.group(1)) == dropped, (dropped, m and m.group(0))
assert "%d of 96 cells recorded in all" % (96 - dropped) in log, log
print("decisions", [(c["id"], c["decision"], c["requests_used"]) for c in cands], "dropped", dropped)
PY
check "a: shards lack exactly the dropped cells" "$py" "$work/sequential-check.py" "$work/a" \
  "$work/run-a.txt" 2

# Resume: nothing more runs, the decisions are kept.
cp "$work/a/sequential/seqc.json" "$work/seqc-first.json"
ls "$work/a/shards" >"$work/shards-first.txt"
check "run a again (resume)" expect_rc 0 "${mpi[@]}" "$kv" run "$work/a.toml"
cp "$work/err.txt" "$work/run-a2.txt"
check "resume: nothing recorded now" contains "$work/run-a2.txt" "0 cell(s) recorded now"
check "resume: nothing left to run" contains "$work/run-a2.txt" "0 cells in 0 units to run"
check "resume: the dropped cells are known before running" contains "$work/run-a2.txt" \
  "pending cell(s) already dropped (their candidates' tests decided)"
check "resume: decisions unchanged" cmp "$work/a/sequential/seqc.json" "$work/seqc-first.json"
ls "$work/a/shards" >"$work/shards-second.txt"
check "resume: no new shard" cmp "$work/shards-second.txt" "$work/shards-first.txt"

# One process: waves of one unit; the same decisions, exactly the requests used are run.
check "plan b" expect_rc 0 "$kv" plan "$work/b.toml"
check "run b (1 process)" expect_rc 0 "$kv" run "$work/b.toml"
check "b: same decisions as the 2-rank run" cmp "$work/b/sequential/seqc.json" \
  "$work/seqc-first.json"
check "b: shards lack exactly the dropped cells" "$py" "$work/sequential-check.py" "$work/b" \
  "$work/err.txt" 1

# reduce replays the decisions from the records.
check "reduce a" expect_rc_in "0 3" "$kv" reduce "$work/a" --no-figures
check "reduce: replay equals the run's decisions" "$py" - "$work/a" <<'PY'
import csv, json, sys
out = sys.argv[1]
plan = json.load(open(out + "/sequential/seqc.json"))["plans"][0]
cands = plan["candidates"]
rows = [r for r in csv.DictReader(open(out + "/report/tables/certification_candidates.csv"))
        if r["block"] == "seqc"]
assert [r["candidate"] for r in rows] == [c["id"] for c in cands], rows
for r, c in zip(rows, cands):
    want = c["decision"] + (" (stopped early)" if c["stopped_early"] else "")
    assert r["sequential_decision"] == want, (r, c)
    assert int(r["sequential_requests"]) == c["requests_used"], (r, c)
row = [r for r in csv.DictReader(open(out + "/report/tables/certification.csv"))
       if r["block"] == "seqc"]
assert len(row) == 1, row
row = row[0]
assert row["sequential_selected"] == plan["selected"], (row, plan)
assert int(row["sequential_requests"]) == sum(c["requests_used"] for c in cands), row
n = plan["n_max"]  # no request is excluded here
saved = sum(n - c["requests_used"] for c in cands) / (len(cands) * n)
assert abs(float(row["compute_saved"]) - saved) < 1e-12, (row["compute_saved"], saved)
# Every cell reduce calls missing is a dropped calibration cell of knorm@0.5 or @0.75.
splits = json.load(open(out + "/prereg.json"))["splits"]["r"]
missing = list(csv.DictReader(open(out + "/report/tables/missing_cells.csv")))
for m in missing:
    assert m["method"] == "knorm" and m["budget"] in ("compression=0.5", "compression=0.75"), m
    assert int(m["instance"]) in splits[m["task"]]["calibration"], m
print("reduce:", row["sequential_selected"], row["sequential_requests"], row["compute_saved"],
      "missing", len(missing))
PY
check "report.md shows the sequential columns" contains "$work/a/report/report.md" \
  "Sequential blocks: the replayed anytime-valid decision"

# A stop during the waves, resumed with another world size, reaches the decisions of one
# uninterrupted process: c, d = 200 instances per task, ε = δ = 0.05 (certifying needs at least
# 127 requests of the 300, about 64 waves of 2). SIGUSR1 goes to mpirun once a rank has printed
# its first wave unit (not after a fixed delay: on a loaded machine the ranks can take seconds to
# start); on a machine fast enough to finish first the run exits 0 and only the comparison is
# made.
write_long_study() {  # write_long_study FILE OUTPUT_DIR
  write_study "$1" "$2"
  sed -i -e 's/^instances = 12$/instances = 200/' -e 's/^epsilon = 0.9$/epsilon = 0.05/' \
    -e 's/^delta = 0.2$/delta = 0.05/' -e 's/^calibration = 8$/calibration = 150/' \
    -e 's/^test = 4$/test = 10/' "$1"
}
write_long_study "$work/c.toml" "$work/c"
write_long_study "$work/d.toml" "$work/d"
check "plan c" expect_rc 0 "$kv" plan "$work/c.toml"
"${mpi[@]}" "$kv" run "$work/c.toml" >"$work/run-c.txt" 2>&1 &
run_pid=$!
for ((tick = 0; tick < 3000; tick++)); do  # at most 300 s
  grep -q 'sequential calibration: unit' "$work/run-c.txt" && break
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 0.1
done
kill -USR1 "$run_pid" 2>/dev/null
wait "$run_pid"
rc=$?
check "run c stopped by SIGUSR1: exit 3 or done (exit 0)" test "$rc" = 3 -o "$rc" = 0
if [ "$rc" = 3 ]; then
  echo "run c stopped: $(grep -c 'sequential calibration: unit' "$work/run-c.txt") wave unit(s) ran"
  check "c: stopped with cells remaining" contains "$work/run-c.txt" "remain (stopped by"
  check "c: no decisions published before the tests decided" test ! -e "$work/c/sequential/seqc.json"
else
  echo "run c finished before the stop signal: only the decisions are compared"
fi
check "run c again with 3 ranks (resume)" expect_rc 0 mpirun -np 3 -x OMP_NUM_THREADS \
  "$kv" run "$work/c.toml"
check "plan d" expect_rc 0 "$kv" plan "$work/d.toml"
check "run d (1 process, uninterrupted)" expect_rc 0 "$kv" run "$work/d.toml"
check "c (stopped, resumed on 3 ranks) and d (1 process): the same decisions" \
  cmp "$work/c/sequential/seqc.json" "$work/d/sequential/seqc.json"
check "d: the tests certified on fewer than the 300 requests" "$py" - "$work/d" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1] + "/sequential/seqc.json"))["plans"][0]
assert plan["n_max"] == 300, plan
for c in plan["candidates"]:
    assert c["decision"] == "certified" and 127 <= c["requests_used"] < 300, c
print([(c["id"], c["requests_used"]) for c in plan["candidates"]])
PY

echo "sequential_run_test: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
