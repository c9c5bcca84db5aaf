#!/usr/bin/env bash
# End-to-end test of `kvaudit plan` for a RULER benchmark with generation_tokenizer (the
# cross-tokenizer pitfall, docs/CLI.md "kvaudit plan: the tokenizer check"):
#  * a self-contained study: data sized with the committed SentencePiece model (A =
#    tests/benchmarks/ruler/golden/spm_ruler, digits split) and evaluated by an HF model directory
#    whose tokenizer B is the committed GPT-2-style BPE (tests/golden/tokenizers/bpe_gpt2) and whose
#    config.json (the tiny llama golden's, with 4096 positions) sets the limit: the report is printed
#    and written beside prereg.json, excluded instances are counted per task with their reasons, the
#    file is never replaced (identical text is left, different text goes to tokenizer-check-2.txt),
#    --dry-run and errors write nothing, and a manifest without the key generates nothing;
#  * manifests/tokenizer-pitfall.toml on the embedded SmolLM2 GGUF (skipped, saying why, when the
#    model is absent), whose report is printed for the log.
# Usage: plan_tokenizer_check_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_cli_test "$1" "$2" "$3"

# The study: model B = an HF directory (config.json + tokenizer.json), tokenizer A = spm_ruler.
study="$work/study"
# Weights matching the config: plan checks the model's header and tensor table.
make_tiny_hf_model "$study/model-b"
write_manifest() {  # write_manifest FILE LENGTH GENERATION_TOKENIZER
  cat >"$1" <<EOF
[study]
name = "pitfall-test"
seed = 7
output_dir = "results"

[[models]]
name = "gpt2-style"
path = "model-b"
format = "hf"
chat_template = "none"

[[benchmarks]]
name = "ruler-small"
kind = "ruler"
tasks = ["niah_single_1", "niah_multikey_3", "vt", "cwe"]
length = $2
instances = 3
generation_tokenizer = "$3"

[methods.snapkv]
[methods.knorm]

[[grids]]
name = "g"
benchmarks = ["ruler-small"]
methods = ["snapkv", "knorm"]
compression = [0.5]
protocols = ["query-aware"]
backends = ["sdpa"]
EOF
}
spm="$src/tests/benchmarks/ruler/golden/spm_ruler"
write_manifest "$study/pitfall.toml" 2048 "$spm"
report="$study/results/tokenizer-check.txt"

check "dry run exits 0" expect_rc 0 "$kv" plan "$study/pitfall.toml" --dry-run
check "dry run prints the report" contains "$work/out.txt" "first excluded instance of each task:"
check "dry run names the file" contains "$work/out.txt" "the tokenizer check $report"
check "dry run wrote nothing" test ! -e "$study/results"

check "plan exits 0" expect_rc 0 "$kv" plan "$study/pitfall.toml"
cp "$work/out.txt" "$work/plan1.txt"
check "plan summary names A" contains "$work/out.txt" "sized with generation_tokenizer $spm (no chat template)"
check "lock written" test -f "$study/results/prereg.json"
check "report written" test -f "$report"
check "plan says it wrote the report" contains "$work/out.txt" "tokenizer check: wrote $report"
check "report names A" contains "$report" "A (generation): SentencePiece BPE from $spm/tokenizer.model"
check "report names B" contains "$report" "B (evaluated):  byte-level BPE from $study/model-b/tokenizer.json"
check "report limit" contains "$report" "limit: min(max_position_embeddings 4096, configured 2048) = 2048"
check "report header" contains "$report" "task             nominal     n A median     B min/median/max  ratio  excluded"
check "report names the study and hash" contains "$report" "of study 'pitfall-test', manifest sha256 $(sed -n 's/.*"manifest_sha256": "\([0-9a-f]*\)".*/\1/p' "$study/results/prereg.json")"
# The printed report is the file (the file is a contiguous block of plan's output).
check "file is what plan printed" grep -qF -- "$(tail -n 3 "$report")" "$work/plan1.txt"
# Per-task rows: 4 tasks x 3 instances at nominal 2048; their excluded counts add up to the total,
# which is > 0 (the pitfall); every excluded task has its first reason.
rows=$(awk '$2 == 2048 && $3 == 3 {print}' "$report")
check "one row per task" test "$(printf '%s\n' "$rows" | wc -l)" = 4
sum=$(printf '%s\n' "$rows" | awk '{s += $NF} END {print s}')
total=$(sed -n 's/^  excluded: \([0-9]*\) of 12 instances (never truncated)$/\1/p' "$report")
check "excluded total line" test -n "$total"
check "excluded sum matches" test "$sum" = "$total"
check "the pitfall excludes instances" test "${total:-0}" -gt 0
reasons=$(grep -c ': excluded, not truncated' "$report")
with_excluded=$(printf '%s\n' "$rows" | awk '$NF > 0' | wc -l)
check "one reason per task with exclusions" test "$reasons" = "$with_excluded"
check "reasons name the limit" contains "$report" "> limit 2048 (min(max_position_embeddings 4096, configured 2048) = 2048); generated for"
echo "--- the tokenizer check of the self-contained study:"
cat "$report"

# Re-planning leaves the lock and the report; a different earlier report is kept, not replaced.
sum1=$(sha256sum "$report")
check "re-plan exits 0" expect_rc 0 "$kv" plan "$study/pitfall.toml"
check "re-plan finds the report unchanged" contains "$work/out.txt" "tokenizer check: unchanged in $report"
check "report untouched" test "$(sha256sum "$report")" = "$sum1"
check "no second report" test ! -e "$study/results/tokenizer-check-2.txt"
printf 'an earlier measurement\n' >"$report"
check "re-plan after a change exits 0" expect_rc 0 "$kv" plan "$study/pitfall.toml"
check "new report goes beside it" contains "$work/out.txt" "tokenizer check: wrote $study/results/tokenizer-check-2.txt"
check "earlier report kept" test "$(cat "$report")" = "an earlier measurement"
check "second report is the measurement" contains "$study/results/tokenizer-check-2.txt" "first excluded instance of each task:"

# Errors: nothing written.
mkdir -p "$work/bad"
cp -r "$study/model-b" "$work/bad/"
write_manifest "$work/bad/missing.toml" 2048 "no-such-tokenizer.model"
check "missing A exits 1" expect_rc 1 "$kv" plan "$work/bad/missing.toml"
check "missing A message" contains "$work/err.txt" "benchmarks.ruler-small.generation_tokenizer: $work/bad/no-such-tokenizer.model does not exist"
write_manifest "$work/bad/tooshort.toml" 256 "$spm"
check "unsatisfiable length exits 1" expect_rc 1 "$kv" plan "$work/bad/tooshort.toml"
check "unsatisfiable length message" contains "$work/err.txt" "even the smallest haystack"
check "errors wrote nothing" test ! -e "$work/bad/results"

# Without the key, plan generates nothing but instance 0 of each task, fitted with the model's own
# tokenizer (plan_checks.h); vt's one-shot example cannot be made with this tiny byte-level BPE, so
# plan refuses that task naming it, and the manifest without it plans.
sed '/^generation_tokenizer/d' "$study/pitfall.toml" >"$work/bad/plain-vt.toml"
check "plain plan with vt refused" expect_rc 1 "$kv" plan "$work/bad/plain-vt.toml" --dry-run
check "plain plan names the task" contains "$work/err.txt" "benchmarks.ruler-small.tasks: task 'vt' cannot be generated with model 'gpt2-style'"
sed -e '/^generation_tokenizer/d' -e 's/, "vt", "cwe"\]/, "cwe"]/' "$study/pitfall.toml" >"$work/bad/plain.toml"
check "plain plan exits 0" expect_rc 0 "$kv" plan "$work/bad/plain.toml" --dry-run
check "plain plan has no tokenizer check" lacks "$work/out.txt" "tokenizer check"

# The example manifest on the embedded default model.
smollm="$src/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$smollm" ]; then
  check "pitfall manifest plan" expect_rc 0 "$kv" plan "$src/manifests/tokenizer-pitfall.toml" \
    --output-dir "$work/example"
  check "pitfall manifest report written" test -f "$work/example/tokenizer-check.txt"
  check "pitfall manifest checks both benchmarks" test "$(grep -c '^ model smollm2-135m-instruct' "$work/example/tokenizer-check.txt")" = 2
  # The base-template set overflows: the chatml turn is added to instances sized up to 4096.
  base_excluded=$(awk '/^benchmark ruler-4k-base/ {f = 1} /^benchmark ruler-4k-spm/ {f = 0}
    f && /^  excluded: / {print $2}' "$work/example/tokenizer-check.txt")
  check "base-template set has excluded instances" test "${base_excluded:-0}" -gt 0
  echo "--- the tokenizer check of manifests/tokenizer-pitfall.toml:"
  cat "$work/example/tokenizer-check.txt"
else
  echo "SKIP manifests/tokenizer-pitfall.toml: $smollm is absent (tools/fetch_default_model.sh fetches it)"
fi

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
