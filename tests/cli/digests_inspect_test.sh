#!/usr/bin/env bash
# End-to-end test of the content digests (records schema 4; docs/RECORDS.md §Content digests) and
# of `kvaudit inspect --selections` / `--diff`, on a tiny HF model made here: every ok record has
# both digests; random cells keep identical positions under sdpa and eager (their key has no
# backend) and the reduce report's backend_selections table says so; `inspect --selections`
# re-derives a cell, reproduces both recorded digests, and its JSON lines let an outside script
# (Python, the documented recipe) recompute them; `inspect --diff` finds a 1-rank and a 2-rank run
# identical cell for cell, and a run with snapkv's window changed different in snapkv's cells only.
# Usage: digests_inspect_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_model_cli_test "$1" "$2" "$3"

make_tiny_hf_model "$work/tiny"
write_backend_grid_study "$work/a.toml" "$work/a" digests 11 16
write_backend_grid_study "$work/b.toml" "$work/b" digests 11 16
write_backend_grid_study "$work/c.toml" "$work/c" digests 11 8

check "plan a" expect_rc 0 "$kv" plan "$work/a.toml"
check "run a (1 process)" expect_rc 0 "$kv" run "$work/a.toml"
check "plan b" expect_rc 0 "$kv" plan "$work/b.toml"
check "run b (mpirun -np 2)" expect_rc 0 mpirun -np 2 -x OMP_NUM_THREADS \
  "$kv" run "$work/b.toml"
check "plan c" expect_rc 0 "$kv" plan "$work/c.toml"
check "run c (snapkv window 8)" expect_rc 0 "$kv" run "$work/c.toml"

# Every ok record has both digests; random and full-KV cells keep the same positions under both
# backends; the schema version is 5.
check "records: digests present, random identical across backends" "$py" - "$work/a/shards" <<'PY'
import glob, sys
import h5py
rows = []
for path in sorted(glob.glob(sys.argv[1] + "/part-*.h5")):
    with h5py.File(path, "r") as f:
        assert int(f.attrs["schema_version"]) == 6, path
        rows += list(f["records"][()])
status_ok = 0
ok = [r for r in rows if r["status"] == status_ok]
assert len(ok) == len(rows) == 2 * 2 * 2 * (3 * 2 + 1) * 2, len(rows)
for r in ok:
    assert r["prompt_digest"] != 0 and r["kept_digest"] != 0, r
groups = {}
for r in ok:
    key = (r["task"], r["instance"], r["method"], float(r["compression"]) if r["compression"] == r["compression"] else -1.0, r["protocol"])
    groups.setdefault(key, {})[int(r["attention_backend"])] = (int(r["kept_digest"]), int(r["prompt_digest"]))
random_pairs = 0
for key, by_backend in groups.items():
    assert len(by_backend) == 2, key
    sdpa, eager = by_backend[0], by_backend[1]
    assert sdpa[1] == eager[1], ("prompt differs across backends", key)
    if key[2] in (b"random", b"full"):
        assert sdpa[0] == eager[0], ("kept set differs across backends", key)
        random_pairs += key[2] == b"random"
assert random_pairs == 2 * 2 * 2 * 2, random_pairs
print("random pairs identical across backends:", random_pairs)
PY

check "reduce a" expect_rc 0 "$kv" reduce "$work/a" --no-figures
sel="$work/a/report/tables/backend_selections.csv"
check "backend_selections table written" test -f "$sel"
check "random rows are identical across backends" "$py" - "$sel" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
random_rows = [r for r in rows if r["method"] == "random"]
assert len(random_rows) == 4, rows
for r in random_rows:
    assert r["selection"] == "identical" and r["kept_identical"] == r["pairs"] == "4", r
assert all(r["selection"] in ("identical", "differs") for r in rows), rows
PY
check "report.md shows the table" contains "$work/a/report/report.md" "Kept sets under sdpa and eager"

# inspect --selections on a snapkv cell (query-aware, eager): both digests reproduced, and an
# outside recomputation from the JSON lines (docs/RECORDS.md recipe) gives the recorded digests.
cell=$("$py" - "$work/a/shards" <<'PY'
import glob, sys
import h5py
for path in sorted(glob.glob(sys.argv[1] + "/part-*.h5")):
    with h5py.File(path, "r") as f:
        for r in f["records"][()]:
            if r["method"] == b"snapkv" and r["protocol"] == 0 and r["attention_backend"] == 1:
                print("%016x" % int(r["cell_id"]))
                sys.exit(0)
PY
)
check "a snapkv cell found" test -n "$cell"
check "inspect --selections exits 0" expect_rc 0 "$kv" inspect "$work/a" --cell "$cell" --selections --out "$work/sel.jsonl"
check "inspect says it matches" contains "$work/err.txt" "matches the record"
check "outside recomputation equals the record" "$py" - "$work/sel.jsonl" "$work/a/shards" "$cell" <<'PY'
import glob, hashlib, json, struct, sys
import h5py
lines = [json.loads(l) for l in open(sys.argv[1])]
head, heads = lines[0], lines[1:]
assert len(heads) == head["layers"] * head["kv_heads"], len(heads)
ids = head["prompt_ids"]["context"] + head["prompt_ids"]["question"] + head["prompt_ids"]["suffix"]
prompt = int.from_bytes(hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).digest()[:8], "big")
msg = struct.pack("<II", head["layers"], head["kv_heads"])
for h in heads:
    msg += struct.pack("<I", len(h["kept"])) + struct.pack("<%dI" % len(h["kept"]), *h["kept"])
kept = int.from_bytes(hashlib.sha256(msg).digest()[:8], "big")
want = int(sys.argv[3], 16)
for path in glob.glob(sys.argv[2] + "/part-*.h5"):
    with h5py.File(path, "r") as f:
        for r in f["records"][()]:
            if int(r["cell_id"]) == want:
                assert int(r["prompt_digest"]) == prompt, (hex(prompt), hex(int(r["prompt_digest"])))
                assert int(r["kept_digest"]) == kept, (hex(kept), hex(int(r["kept_digest"])))
                assert len(ids) == r["n_prompt_tokens"] and len(head["prompt_ids"]["context"]) == r["n_context_tokens"]
                print("recomputed", "%016x" % prompt, "%016x" % kept)
                sys.exit(0)
sys.exit("cell not found")
PY
check "inspect a full-KV cell too" "$py" - "$work/a/shards" "$kv" "$work/a" <<'PY'
import glob, subprocess, sys
import h5py
for path in sorted(glob.glob(sys.argv[1] + "/part-*.h5")):
    with h5py.File(path, "r") as f:
        for r in f["records"][()]:
            if r["method"] == b"full" and r["protocol"] == 1:
                p = subprocess.run([sys.argv[2], "inspect", sys.argv[3], "--cell", "%016x" % int(r["cell_id"]), "--selections", "--out", "/dev/null"], capture_output=True, text=True)
                assert p.returncode == 0 and "matches the record" in p.stderr, p.stderr
                sys.exit(0)
sys.exit("no full-KV cell")
PY

# Refusals.
check "inspect --selections refuses a malformed id" expect_rc 1 "$kv" inspect "$work/a" --cell 12xyz --selections
check "malformed id message" contains "$work/err.txt" "--cell: '12xyz' is not a cell id"
check "inspect --selections refuses an unknown cell" expect_rc 1 "$kv" inspect "$work/a" --cell 0000000000000001 --selections
check "unknown cell message" contains "$work/err.txt" "no such cell in the study"
check "--cell without --selections" expect_rc 1 "$kv" inspect "$work/a" --cell "$cell"
check "--diff needs two studies" expect_rc 1 "$kv" inspect --diff "$work/a"

# 1 process vs 2 ranks: identical prompts, kept sets and outputs in every cell.
check "inspect --diff a b" expect_rc 0 "$kv" inspect --diff "$work/a" "$work/b"
cp "$work/out.txt" "$work/diff-ab.txt"
check "a/b all matched" contains "$work/diff-ab.txt" "$(printf 'matched by (model, benchmark, task, instance, backend, method, budget, protocol): 112; only in A: 0; only in B: 0')"
check "a/b prompts identical" grep -qE '^  prompts +112 100.0% +0 ' "$work/diff-ab.txt"
check "a/b kept sets identical" grep -qE '^  kept sets +112 100.0% +0 ' "$work/diff-ab.txt"
check "a/b outputs identical" grep -qE '^  outputs +112 100.0% +0 ' "$work/diff-ab.txt"
check "a/b nothing differs" contains "$work/diff-ab.txt" "no compared cell differs"

# snapkv's window changed: only snapkv's cells differ (and they have other cell ids).
check "inspect --diff a c" expect_rc 0 "$kv" inspect --diff "$work/a" "$work/c"
cp "$work/out.txt" "$work/diff-ac.txt"
check "a/c: snapkv cells differ, nothing else" "$py" - "$work/diff-ac.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
per = dict((m.group(1), (int(m.group(2)), int(m.group(3))))
           for m in re.finditer(r"^  (\S+) +(\d+) of (\d+)$", text, re.M))
assert set(per) == {"full", "knorm", "random", "snapkv"}, per
assert per["snapkv"][0] > 0, per
assert all(per[m][0] == 0 for m in ("full", "knorm", "random")), per
assert "32 matched cells have different cell ids" in text, text
firsts = [l for l in text.splitlines() if l.startswith("  ") and "#" in l]
assert firsts and all(" snapkv " in l for l in firsts), firsts
print("snapkv differing:", per["snapkv"])
PY

cat "$work/diff-ab.txt" "$work/diff-ac.txt"
echo "digests_inspect_test: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
