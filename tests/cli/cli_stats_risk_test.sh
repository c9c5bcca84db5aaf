#!/usr/bin/env bash
# kvaudit stats hb / wsr / power / sample-size (issue 17) against values computed independently in
# tests/golden/statistics/risk_control_golden.json (tools/golden/make_risk_control_golden.py:
# mpmath and MAPIE Hoeffding–Bentkus p-values, confseq's WSR martingale with brentq, exact K* and
# mpmath power, a scipy scan for the sample size), and the bad arguments each refuses with exit 1
# and a message naming the option (rate or power outside (0, 1), negative n, a missing option, a
# loss file with a non-number or a value outside [0, 1] on a named line).
# Usage: cli_stats_risk_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_cli_test "$1" "$2" "$3"
python=$(command -v python3)
golden="$src/tests/golden/statistics/risk_control_golden.json"

# json_ok FILE EXPR: EXPR holds for j = the JSON object in FILE and g = the golden file.
json_ok() {
  "$python" -c 'import json, sys
j = json.load(open(sys.argv[1]))
g = json.load(open(sys.argv[3]))
close = lambda a, b, tol: a == b or abs(a - b) <= tol * max(abs(a), abs(b))
ok = eval(sys.argv[2])
print("  " + sys.argv[2] + ": " + str(j), file=sys.stderr) if not ok else None
sys.exit(0 if ok else 1)' "$1" "$2" "$golden"
}

# --- the two acceptance commands ----------------------------------------------------------------
check "power: runs" expect_rc 0 "$kv" stats power --n 1200 --epsilon 0.05 --delta 0.05 --rate 0.03
check "power: prints K*" contains "$work/out.txt" "K*        47"
cp "$work/out.txt" "$work/power.txt"
check "power --json" expect_rc 0 "$kv" stats power --n 1200 --epsilon 0.05 --delta 0.05 \
  --rate 0.03 --json
pw='[r for r in g["power"] if (r["n"], r["epsilon"], r["rate"]) == (1200, 0.05, 0.03)][0]'
check "power: K* and power = golden (exact K*, mpmath sum)" json_ok "$work/out.txt" \
  "(j['k_star'] == ${pw}['k_star']
    and close(j['power'], ${pw}['power'], 1e-9))"

check "sample-size: runs" expect_rc 0 "$kv" stats sample-size --epsilon 0.05 --delta 0.05 \
  --rate 0.03 --power 0.8
cp "$work/out.txt" "$work/sample_size.txt"
ss='[r for r in g["sample_size"] if (r["rate"], r["target_power"]) == (0.03, 0.8)][0]'
check "sample-size --json --n-max 4000" expect_rc 0 "$kv" stats sample-size --epsilon 0.05 \
  --delta 0.05 --rate 0.03 --power 0.8 --n-max 4000 --json
check "sample-size: n, K*, power, stable n = golden (scipy scan)" json_ok "$work/out.txt" \
  "(j['found'] and j['n'] == ${ss}['n'] and j['k_star'] == ${ss}['k_star']
    and close(j['power'], ${ss}['power'], 1e-9) and j['stable_n'] == ${ss}['stable_n']
    and close(j['stable_power'], ${ss}['stable_power'], 1e-9))"
check "sample-size: the table shows n" contains "$work/sample_size.txt" \
  "n         $("$python" -c "import json; g = json.load(open('$golden')); print(${ss}['n'])")"
check "sample-size: not reachable within n-max" expect_rc 0 "$kv" stats sample-size \
  --epsilon 0.05 --delta 0.05 --rate 0.045 --power 0.8 --n-max 600 --json
check "sample-size: found false, power at n-max = golden" json_ok "$work/out.txt" \
  '(not j["found"] and j["n"] is None and close(j["power_at_n_max"],
    [r for r in g["sample_size"] if r["rate"] == 0.045][0]["power_at_n_max"], 1e-9))'

# --- hb against mpmath and MAPIE ------------------------------------------------------------------
hb_rows=$("$python" -c 'import json, sys
g = json.load(open(sys.argv[1]))
rows = [r for r in g["hoeffding_bentkus"] if r["p_value"] > 1e-290]
for r in rows[::37]:
    print(repr(r["r_hat"]), r["n"], repr(r["alpha"]), repr(r["p_value"]))' "$golden")
count=0
while read -r mean n alpha want; do
  check "hb --mean $mean --n $n --alpha $alpha" expect_rc 0 "$kv" stats hb --mean "$mean" \
    --n "$n" --alpha "$alpha" --json
  check "hb $mean $n $alpha: p = $want (mpmath)" json_ok "$work/out.txt" \
    "close(j['p_value'], $want, 1e-9)"
  count=$((count + 1))
done <<<"$hb_rows"
check "hb: at least 8 golden rows checked ($count)" test "$count" -ge 8

# --- wsr against confseq ------------------------------------------------------------------------
"$python" -c 'import json, sys
g = json.load(open(sys.argv[1]))
row = [r for r in g["wsr"] if r["name"] == "zero_inflated_n200" and r["delta"] == 0.1][0]
open(sys.argv[2] + "/losses.txt", "w").write("\n".join(repr(x) for x in row["losses"]) + "\n")
open(sys.argv[2] + "/losses_list.txt", "w").write(",".join(repr(x) for x in row["losses"][:50]))
' "$golden" "$work"
wsr_row='[r for r in g["wsr"] if r["name"] == "zero_inflated_n200" and r["delta"] == 0.1][0]'
check "wsr --losses FILE" expect_rc 0 "$kv" stats wsr --losses "$work/losses.txt" --delta 0.1 \
  --alpha 0.2 --json
check "wsr: upper bound = confseq brentq root, p = 1/max capital (confseq)" json_ok \
  "$work/out.txt" \
  "(abs(j['upper_bound'] - ${wsr_row}['upper_bound_confseq_brentq']) <= 1e-10 and j['n'] == 200
    and close(j['p_value'],
              [p for p in ${wsr_row}['p_values'] if p['alpha'] == 0.2][0]['p_value'], 1e-9))"
check "wsr: table" expect_rc 0 "$kv" stats wsr --losses "$work/losses.txt" --delta 0.1
check "wsr: table shows the bound" contains "$work/out.txt" "upper bound (1 - delta)"
check "wsr --losses-list" expect_rc 0 "$kv" stats wsr --losses-list \
  "$(cat "$work/losses_list.txt")" --delta 0.1 --json
check "wsr --losses-list: 50 losses, bound in [mean, 1]" json_ok "$work/out.txt" \
  'j["n"] == 50 and j["mean"] <= j["upper_bound"] <= 1 and "p_value" not in j'

# --- bad arguments: exit 1 with a message naming the option -------------------------------------
printf '0.1\n0.2\n\nabc\n0.3\n' >"$work/bad_text.txt"
printf '0.1\n1.5\n' >"$work/bad_range.txt"
check "power: rate 0 refused" expect_rc 1 "$kv" stats power --n 100 --epsilon 0.05 --delta 0.05 \
  --rate 0
check "power: names --rate" contains "$work/err.txt" "--rate must lie in (0, 1)"
check "power: rate 1.2 refused" expect_rc 1 "$kv" stats power --n 100 --epsilon 0.05 \
  --delta 0.05 --rate 1.2
check "power: negative n refused" expect_rc 1 "$kv" stats power --n -5 --epsilon 0.05 \
  --delta 0.05 --rate 0.03
check "power: names --n" contains "$work/err.txt" "--n must be"
check "power: missing --rate" expect_rc 1 "$kv" stats power --n 100 --epsilon 0.05 --delta 0.05
check "power: says --rate is required" contains "$work/err.txt" "--rate is required"
check "sample-size: power 1 refused" expect_rc 1 "$kv" stats sample-size --epsilon 0.05 \
  --delta 0.05 --rate 0.03 --power 1
check "sample-size: names --power" contains "$work/err.txt" "--power must lie in (0, 1)"
check "sample-size: power -0.2 refused" expect_rc 1 "$kv" stats sample-size --epsilon 0.05 \
  --delta 0.05 --rate 0.03 --power -0.2
check "sample-size: missing --power" expect_rc 1 "$kv" stats sample-size --epsilon 0.05 \
  --delta 0.05 --rate 0.03
check "sample-size: says --power is required" contains "$work/err.txt" "--power is required"
check "sample-size: rate >= epsilon refused" expect_rc 1 "$kv" stats sample-size \
  --epsilon 0.05 --delta 0.05 --rate 0.05 --power 0.8
check "sample-size: says rate must be below epsilon" contains "$work/err.txt" \
  "--rate must be below --epsilon"
check "sample-size: n-max 0 refused" expect_rc 1 "$kv" stats sample-size --epsilon 0.05 \
  --delta 0.05 --rate 0.03 --power 0.8 --n-max 0
check "hb: mean 1.5 refused" expect_rc 1 "$kv" stats hb --mean 1.5 --n 10 --alpha 0.1
check "hb: names --mean" contains "$work/err.txt" "--mean"
check "hb: missing --alpha" expect_rc 1 "$kv" stats hb --mean 0.1 --n 10
check "hb: says --alpha is required" contains "$work/err.txt" "--alpha is required"
check "hb: n 0 refused" expect_rc 1 "$kv" stats hb --mean 0.1 --n 0 --alpha 0.1
check "wsr: a non-number on line 4" expect_rc 1 "$kv" stats wsr --losses "$work/bad_text.txt" \
  --delta 0.1
check "wsr: names the file and line 4" contains "$work/err.txt" \
  "bad_text.txt:4: 'abc' is not a number"
check "wsr: a loss outside [0, 1] on line 2" expect_rc 1 "$kv" stats wsr --losses \
  "$work/bad_range.txt" --delta 0.1
check "wsr: names line 2" contains "$work/err.txt" "bad_range.txt:2: loss 1.5 is outside [0, 1]"
check "wsr: list entry 3 outside [0, 1]" expect_rc 1 "$kv" stats wsr --losses-list 0.1,0.2,-0.1 \
  --delta 0.1
check "wsr: names entry 3" contains "$work/err.txt" "--losses-list entry 3"
check "wsr: neither --losses nor --losses-list" expect_rc 1 "$kv" stats wsr --delta 0.1
check "wsr: says give exactly one" contains "$work/err.txt" "exactly one of --losses"
check "wsr: missing --delta" expect_rc 1 "$kv" stats wsr --losses-list 0.1,0.2
check "wsr: says --delta is required" contains "$work/err.txt" "--delta is required"
check "wsr: unreadable file" expect_rc 1 "$kv" stats wsr --losses "$work/none.txt" --delta 0.1

echo "--- kvaudit stats power --n 1200 --epsilon 0.05 --delta 0.05 --rate 0.03"
cat "$work/power.txt"
echo "--- kvaudit stats sample-size --epsilon 0.05 --delta 0.05 --rate 0.03 --power 0.8"
cat "$work/sample_size.txt"
echo "cli_stats_risk: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
