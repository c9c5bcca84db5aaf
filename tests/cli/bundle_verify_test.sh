#!/usr/bin/env bash
# End-to-end test of `kvaudit bundle` and `kvaudit verify` (docs/ARTIFACTS.md) on a tiny HF model
# made here: a complete study bundles (directory and tar; `sha256sum -c` agrees) and verifies with
# every table matching, also after the bundle and the study moved (no absolute path survives);
# one flipped byte of a shard, one edited CSV cell (also with SHA256SUMS re-made to match) and a
# shard from another study each make verify exit 1 naming the file and the table; 10 claims with 2
# altered report exactly those 2; --rerun 20 reproduces 20 cells; an incomplete study is refused
# without --partial and says PARTIAL with it; bad arguments exit 1.
# Usage: bundle_verify_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_model_cli_test "$1" "$2" "$3"

make_tiny_hf_model "$work/tiny"
write_backend_grid_study "$work/s.toml" "$work/study" bundle-3 3 64
write_backend_grid_study "$work/o.toml" "$work/other" bundle-4 4 64
# The study runs on 2 ranks (2 shards: one can go missing below), the other on 1.
check "plan s" expect_rc 0 "$kv" plan "$work/s.toml"
check "run s (mpirun -np 2)" expect_rc 0 mpirun -np 2 -x OMP_NUM_THREADS \
  "$kv" run "$work/s.toml"
check "plan o" expect_rc 0 "$kv" plan "$work/o.toml"
check "run o" expect_rc 0 "$kv" run "$work/o.toml"
for dir in study other; do
  check "reduce $dir" expect_rc 0 "$kv" reduce "$work/$dir" --no-figures
done

# A directory bundle and a tar bundle of the complete study.
check "bundle (directory)" expect_rc 0 "$kv" bundle "$work/study" --out "$work/b"
check "bundle says what it packed" contains "$work/err.txt" "files (2 shards, 112 records, report report)"
check "sha256sum -c agrees" bash -c "cd '$work/b' && sha256sum -c --quiet SHA256SUMS"
check "README says how to verify" contains "$work/b/README.md" "kvaudit verify b --rerun 20 --model tiny=PATH"
check "README gives re-run estimates" contains "$work/b/README.md" "| 20 (\`--rerun 20\`) |"
check "bundle refuses an existing output" expect_rc 1 "$kv" bundle "$work/study" --out "$work/b"
check "bundle (tar)" expect_rc 0 "$kv" bundle "$work/study" --out "$work/b.tar"
check "the tar holds no absolute path" bash -c "! tar -tf '$work/b.tar' | grep -q '^/'"
check "verify the directory" expect_rc 0 "$kv" verify "$work/b"
cp "$work/out.txt" "$work/verify.txt"
check "verify: checksums" contains "$work/verify.txt" "checksums  ok: "
check "verify: every table matches" grep -qE '^report     ok: ([0-9]+) of \1 tables match' "$work/verify.txt"
check "verify: PASS" contains "$work/verify.txt" "verify: PASS"
check "verify the tar" expect_rc 0 "$kv" verify "$work/b.tar"

# Moved: the bundle to another directory and the study away (its absolute paths are gone).
mkdir -p "$work/elsewhere"
cp -r "$work/b" "$work/elsewhere/moved"
mv "$work/study" "$work/study-away"
mv "$work/tiny" "$work/tiny-away"
check "verify a moved bundle" expect_rc 0 "$kv" verify "$work/elsewhere/moved"
mv "$work/study-away" "$work/study"
mv "$work/tiny-away" "$work/tiny"

# One flipped byte of a shard.
cp -r "$work/b" "$work/flip"
shard=$(cd "$work/flip/shards" && ls part-*.h5 | head -1)
"$py" - "$work/flip/shards/$shard" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x01
open(p, "wb").write(bytes(b))
PY
check "verify refuses a flipped shard byte" expect_rc 1 "$kv" verify "$work/flip"
check "flip: names the shard" contains "$work/out.txt" "changed: shards/$shard"
check "flip: the shard fails its sidecar" contains "$work/out.txt" "$shard"
check "flip: FAIL" contains "$work/out.txt" "verify: FAIL"

# One edited CSV cell: named by the checksums and by the table comparison (also when SHA256SUMS
# is re-made to hide the edit).
cp -r "$work/b" "$work/edit"
"$py" - "$work/edit/report/tables/accuracy.csv" <<'PY'
import sys
p = sys.argv[1]
lines = open(p).read().split("\n")
cells = lines[1].split(",")
cells[-8] = "0.123"   # the row's mean
lines[1] = ",".join(cells)
open(p, "w").write("\n".join(lines))
PY
check "verify refuses an edited CSV" expect_rc 1 "$kv" verify "$work/edit"
check "edit: names the file" contains "$work/out.txt" "changed: report/tables/accuracy.csv"
check "edit: names the table" contains "$work/out.txt" "tables/accuracy.csv: differs at line 2"
(cd "$work/edit" && rm SHA256SUMS && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort |
  while read -r f; do sha256sum "$f"; done >SHA256SUMS)
check "verify refuses an edited CSV with re-made sums" expect_rc 1 "$kv" verify "$work/edit"
check "re-made sums: the table is named" grep -qE '^  accuracy +DIFFERS' "$work/out.txt"
check "re-made sums: the file is named" contains "$work/out.txt" "tables/accuracy.csv: differs at line 2"

# A shard swapped for one of another study.
check "bundle the other study" expect_rc 0 "$kv" bundle "$work/other" --out "$work/ob"
cp -r "$work/b" "$work/swap"
victim=$(cd "$work/swap/shards" && ls part-*.h5 | head -1)
foreign=$(cd "$work/ob/shards" && ls part-*.h5 | head -1)
rm "$work/swap/shards/$victim" "$work/swap/shards/$victim.sha256"
cp "$work/ob/shards/$foreign" "$work/ob/shards/$foreign.sha256" "$work/swap/shards/"
check "verify refuses a swapped shard" expect_rc 1 "$kv" verify "$work/swap"
check "swap: the missing shard is named" contains "$work/out.txt" "missing: shards/$victim"
check "swap: the foreign shard is named" contains "$work/out.txt" "not listed in SHA256SUMS: shards/$foreign"
check "swap: the loader names it too" contains "$work/out.txt" "$foreign"

# Claims: 10 numbers copied from the report, 2 of them altered.
"$py" - "$work/b/report/tables/accuracy.csv" "$work/claims.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
keys = ["model", "backend", "benchmark", "task", "protocol", "method", "budget"]
with open(sys.argv[2], "w") as out:
    out.write("table,row,column,value\n")
    for i, r in enumerate(rows[:10]):
        value = float(r["upper"])
        if i in (3, 7):
            value += 0.05
        out.write("accuracy,%s,upper,%.3f\n" % (";".join("%s=%s" % (k, r[k]) for k in keys), value))
PY
check "verify --claims exits 1 (2 altered)" expect_rc 1 "$kv" verify "$work/b" --claims "$work/claims.csv"
check "claims: 8 of 10" contains "$work/out.txt" "claims     8 of 10 claims are contained in the report"
check "claims: exactly lines 5 and 9" bash -c "[ \"\$(grep -o 'claims.csv line [0-9]*' '$work/out.txt' | tr '\n' ' ')\" = 'claims.csv line 5 claims.csv line 9 ' ]"
head -9 "$work/claims.csv" | tail -4 >/dev/null
sed -e '5d' -e '9d' "$work/claims.csv" >"$work/claims-right.csv"
check "verify --claims with the 8 right ones" expect_rc 0 "$kv" verify "$work/b" --claims "$work/claims-right.csv"
printf 'table,row\nx,y\n' >"$work/claims-bad.csv"
check "malformed claims file" expect_rc 1 "$kv" verify "$work/b" --claims "$work/claims-bad.csv"
check "malformed claims: named" contains "$work/err.txt" "claims-bad.csv: line 1: the header must be 'table,row,column,value'"

# Re-run 20 cells on the CPU with the model given.
check "verify --rerun 20" expect_rc 0 "$kv" verify "$work/b" --rerun 20 --model "tiny=$work/tiny"
check "rerun: 20 of 20" contains "$work/out.txt" "re-run: 20 of 20 cells reproduced exactly"
check "rerun: seed printed" contains "$work/out.txt" "cells chosen with seed 0"
check "rerun needs the model" expect_rc 1 "$kv" verify "$work/b" --rerun 20
check "rerun: model named" contains "$work/err.txt" "give the weights of model 'tiny' with --model tiny=PATH"
check "--model without --rerun" expect_rc 1 "$kv" verify "$work/b" --model "tiny=$work/tiny"
check "rerun too many" expect_rc 1 "$kv" verify "$work/b" --rerun 100000 --model "tiny=$work/tiny"

# Incomplete coverage: refused, then bundled with --partial.
cp -r "$work/study" "$work/part"
gone=$(cd "$work/part/shards" && ls part-*.h5 | head -1)
rm "$work/part/shards/$gone" "$work/part/shards/$gone.sha256"
check "bundle refuses an incomplete study" expect_rc 1 "$kv" bundle "$work/part" --out "$work/pb"
check "incomplete: says why" grep -qE 'coverage is incomplete \([1-9][0-9]* of 112 cells have no record, 0 records failed\)' "$work/err.txt"
check "bundle --partial" expect_rc 0 "$kv" bundle "$work/part" --out "$work/pb" --partial
check "partial README" contains "$work/pb/README.md" "**PARTIAL STUDY.**"
check "verify a missing bundle" expect_rc 1 "$kv" verify "$work/nothing-here"

echo "bundle_verify_test: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
