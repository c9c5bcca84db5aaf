#!/usr/bin/env bash
# End-to-end test of the input fingerprints of the preregistration lock (docs/MANIFEST.md §The
# lock): a model file changed between `kvaudit plan` and `kvaudit run` makes run exit 1 naming the
# file and both fingerprints before any shard exists; reduce refuses a changed model the same way
# and writes no report, but reduces a study whose model is absent (a note; reduce reads only
# records); a schema-1 lock (no fingerprints) is still run and reduced, with a note. The study
# runs on a tiny HF model made here (tests/cli/make_tiny_hf_weights.py); the GGUF swap uses the
# SmolLM2 GGUF when it is present (else a printed skip).
# Usage: model_swap_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_cli_test "$1" "$2" "$3"
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# A tiny HF model: the tiny Llama config (vocab and positions widened for the GPT-2-style BPE),
# its tokenizer and weights matching the config.
study="$work/study"
make_tiny_hf_model "$study/tiny"
cp "$study/tiny/model.safetensors" "$work/model.safetensors.orig"
write_tiny_study "$study/study.toml" tiny hf f32 '["niah_single_1"]' 512 1
lock="$study/results/prereg.json"
sha() { sha256sum "$1" | cut -d' ' -f1; }

check "plan exits 0" expect_rc 0 "$kv" plan "$study/study.toml"
check "the lock fingerprints the weights" contains "$lock" "\"sha256\": \"$(sha "$study/tiny/model.safetensors")\""
check "the lock fingerprints the tokenizer" contains "$lock" "\"file\": \"tokenizer.json\""
check "the lock is schema 2" contains "$lock" "\"kvaudit_prereg_schema\": 2"

# One byte of the weights changed after the plan: run refuses before any shard exists.
locked=$(sha "$study/tiny/model.safetensors")
size=$(stat -c %s "$study/tiny/model.safetensors")
printf 'Z' | dd of="$study/tiny/model.safetensors" bs=1 seek=5000 conv=notrunc 2>/dev/null
now=$(sha "$study/tiny/model.safetensors")
check "run refuses a changed model" expect_rc 1 "$kv" run "$study/study.toml"
check "run names the file" contains "$work/err.txt" "$study/tiny/model.safetensors (models.tiny.path): changed since the study was planned"
check "run names the locked fingerprint" contains "$work/err.txt" "locked $size bytes, sha256 $locked"
check "run names the current fingerprint" contains "$work/err.txt" "now $size bytes, sha256 $now"
check "run says nothing was run" contains "$work/err.txt" "nothing was run"
check "run created no shard" test ! -e "$study/results/shards"
check "re-plan refuses the changed model" expect_rc 1 "$kv" plan "$study/study.toml"
check "re-plan names the file" contains "$work/err.txt" "$study/tiny/model.safetensors (models.tiny.path): changed"

# A model swapped for another one (same config, other weights).
python3 - "$study/tiny/model.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
for i in range(len(b) - 4096, len(b)):
    b[i] ^= 0x5A
open(p, "wb").write(bytes(b))
PY
check "run refuses a swapped model" expect_rc 1 "$kv" run "$study/study.toml"
check "swapped: no shard" test ! -e "$study/results/shards"

# Restored: the study runs and reduces.
cp "$work/model.safetensors.orig" "$study/tiny/model.safetensors"
check "run with the locked model" expect_rc 0 "$kv" run "$study/study.toml"
check "run says the inputs are unchanged" contains "$work/err.txt" "models and data unchanged"
check "reduce with the locked model" expect_rc 0 "$kv" reduce "$study/results" --no-figures
check "report written" test -f "$study/results/report/report.md"

# Reduce of a changed model: exit 1, both fingerprints, no report.
printf 'Z' | dd of="$study/tiny/model.safetensors" bs=1 seek=5000 conv=notrunc 2>/dev/null
check "reduce refuses a changed model" expect_rc 1 "$kv" reduce "$study/results" --no-figures
check "reduce names the file" contains "$work/err.txt" "$study/tiny/model.safetensors (models.tiny.path): changed since the study was planned"
check "reduce names the locked fingerprint" contains "$work/err.txt" "locked $size bytes, sha256 $locked"
check "reduce names the current fingerprint" contains "$work/err.txt" "now $size bytes, sha256 $now"
check "reduce wrote no report" test ! -e "$study/results/report-2"

# Reduce where the model is absent (artifact evaluation): a note, and the report.
mv "$study/tiny" "$work/tiny-away"
check "reduce without the model" expect_rc 0 "$kv" reduce "$study/results" --no-figures
check "reduce notes the absent weights" contains "$work/err.txt" "models.tiny.path file model.safetensors is absent here"
check "reduce without the model writes its report" test -f "$study/results/report-2/report.md"
check "run without the model refuses" expect_rc 1 "$kv" run "$study/study.toml"
mv "$work/tiny-away" "$study/tiny"
cp "$work/model.safetensors.orig" "$study/tiny/model.safetensors"

# A schema-1 lock (planned by an older kvaudit: no fingerprints) still runs and reduces, with a note.
python3 - "$lock" <<'PY'
import json, os, sys
p = sys.argv[1]
j = json.load(open(p))
del j["inputs"]
j["kvaudit_prereg_schema"] = 1
os.remove(p)
json.dump(j, open(p, "w"), indent=2)
PY
check "schema-1 run" expect_rc 0 "$kv" run "$study/study.toml"
check "schema-1 run note" contains "$work/err.txt" "preregistration schema 1 records no fingerprints"
check "schema-1 reduce" expect_rc 0 "$kv" reduce "$study/results" --no-figures
check "schema-1 reduce note" contains "$work/err.txt" "preregistration schema 1 records no fingerprints"

# A GGUF model changed between plan and run.
smollm="$src/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$smollm" ]; then
  g="$work/gguf"
  mkdir -p "$g"
  cp "$smollm" "$g/model.gguf"
  write_tiny_study "$g/study.toml" model.gguf gguf f32 '["niah_single_1"]' 512 1
  check "gguf plan" expect_rc 0 "$kv" plan "$g/study.toml"
  glocked=$(sha "$g/model.gguf")
  gsize=$(stat -c %s "$g/model.gguf")
  printf 'Z' | dd of="$g/model.gguf" bs=1 seek=60000000 conv=notrunc 2>/dev/null
  check "gguf run refuses the changed file" expect_rc 1 "$kv" run "$g/study.toml"
  check "gguf run names both fingerprints" contains "$work/err.txt" "$g/model.gguf (models.tiny.path): changed since the study was planned: locked $gsize bytes, sha256 $glocked; now $gsize bytes, sha256 $(sha "$g/model.gguf")"
  check "gguf run created no shard" test ! -e "$g/results/shards"
else
  echo "SKIP the GGUF swap: $smollm is absent (tools/fetch_default_model.sh fetches it)"
fi

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
