#!/usr/bin/env bash
# End-to-end test of what `kvaudit plan` refuses before it writes the lock (docs/CLI.md "kvaudit
# plan"): an unloadable model (truncated weights, a tensor of the wrong shape, no tokenizer, a
# truncated GGUF), `dtype = "f16"`, a RULER task whose fixed part cannot fit the length with the
# evaluated tokenizer, an --output-dir that is a file, a directory given as the manifest; and a
# lock that was edited by hand (canonical manifest, counts), refused by plan, run and reduce naming
# the field. Each refusal exits 1 naming the file and the field, and writes no prereg.json.
# Usage: plan_refusals_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_cli_test "$1" "$2" "$3"
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# refused NAME DIR: plan DIR/study.toml exits 1 and writes nothing.
refused() {
  check "$1: plan exits 1" expect_rc 1 "$kv" plan "$2/study.toml"
  check "$1: no lock written" test ! -e "$2/results"
}

d="$work/ok"
make_tiny_hf_model "$d/tiny"
write_tiny_study "$d/study.toml" tiny hf f32 '["niah_single_1"]' 1024 2
check "a good study plans" expect_rc 0 "$kv" plan "$d/study.toml"
check "plan says the model was checked" contains "$work/out.txt" "model tiny: header, tensor table and tokenizer ok"
check "plan says the tasks fit" contains "$work/out.txt" "benchmark r x model tiny: every task fits length 1024"

# dtype = "f16": refused with the file, line and field.
d="$work/f16"
make_tiny_hf_model "$d/tiny"
write_tiny_study "$d/study.toml" tiny hf f16 '["niah_single_1"]' 1024 2
refused "f16" "$d"
check "f16: file, position and field" contains "$work/err.txt" "$d/study.toml:11:9: models.tiny.dtype: \"f16\" is not supported (bf16, f32)"

# Truncated weights: the safetensors header promises more bytes than the file has.
d="$work/truncated"
make_tiny_hf_model "$d/tiny"
head -c 600000 "$d/tiny/model.safetensors" >"$d/tiny/cut" && mv "$d/tiny/cut" "$d/tiny/model.safetensors"
write_tiny_study "$d/study.toml" tiny hf f32 '["niah_single_1"]' 1024 2
refused "truncated safetensors" "$d"
check "truncated safetensors: field and file" contains "$work/err.txt" "models.tiny.path: model 'tiny': $d/tiny/model.safetensors: "

# A tensor of the wrong shape (the config changed after the weights were written).
d="$work/shape"
make_tiny_hf_model "$d/tiny"
sed -i 's/"intermediate_size": 128/"intermediate_size": 96/' "$d/tiny/config.json"
write_tiny_study "$d/study.toml" tiny hf f32 '["niah_single_1"]' 1024 2
refused "wrong shape" "$d"
check "wrong shape: names the tensor and both shapes" contains "$work/err.txt" "tensor 'model.layers.0.mlp.gate_proj.weight': expected shape [96, 64] (from the model config), found [128, 64]"

# No tokenizer.
d="$work/no-tokenizer"
make_tiny_hf_model "$d/tiny"
rm "$d/tiny/tokenizer.json"
write_tiny_study "$d/study.toml" tiny hf f32 '["niah_single_1"]' 1024 2
refused "no tokenizer" "$d"
check "no tokenizer: named" contains "$work/err.txt" "models.tiny.path: model 'tiny': "

# A RULER task whose fixed part (template, question, needles, max_new_tokens) cannot fit.
d="$work/unfittable"
make_tiny_hf_model "$d/tiny"
write_tiny_study "$d/study.toml" tiny hf f32 '["cwe", "niah_single_1"]' 256 2
refused "unfittable task" "$d"
check "unfittable: names the task" contains "$work/err.txt" "benchmarks.r.tasks: task 'cwe' cannot fit length 256 with model 'tiny'"
check "unfittable: says what the smallest haystack needs" contains "$work/err.txt" "even the smallest haystack"

# A truncated GGUF (the SmolLM2 GGUF cut short), when the GGUF is present.
smollm="$src/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$smollm" ]; then
  d="$work/gguf"
  mkdir -p "$d"
  head -c 60000000 "$smollm" >"$d/model.gguf"
  write_tiny_study "$d/study.toml" model.gguf gguf f32 '["niah_single_1"]' 1024 2
  refused "truncated gguf" "$d"
  check "truncated gguf: names the tensor past the end" contains "$work/err.txt" "model.gguf: tensor 'blk."
  check "truncated gguf: says it goes past the end" contains "$work/err.txt" "goes past the end of the file (60000000 bytes)"
else
  echo "SKIP the truncated GGUF: $smollm is absent (tools/fetch_default_model.sh fetches it)"
fi

# --output-dir naming a file; a directory given as the manifest.
d="$work/ok"
: >"$work/a-file"
check "--output-dir FILE refused" expect_rc 1 "$kv" plan "$d/study.toml" --output-dir "$work/a-file"
check "--output-dir FILE named" contains "$work/err.txt" "$work/a-file: not a directory"
check "--output-dir FILE: no internal error" lacks "$work/err.txt" "internal error"
check "manifest DIR refused" expect_rc 1 "$kv" plan "$d"
check "manifest DIR named" contains "$work/err.txt" "$d: is a directory, expected a manifest TOML file"

# A lock edited by hand: plan, run and reduce refuse it naming the field.
lock="$d/results/prereg.json"
cp "$lock" "$work/lock.orig"
tamper() {  # tamper PYTHON_STATEMENT (on the parsed lock j)
  python3 - "$work/lock.orig" "$lock" "$1" <<'PY'
import json, os, sys
j = json.load(open(sys.argv[1]))
exec(sys.argv[3])
os.remove(sys.argv[2])
json.dump(j, open(sys.argv[2], "w"), indent=2)
PY
}
for edit in canonical counts; do
  case $edit in
    canonical) tamper 'j["canonical_manifest"]["study"]["seed"] = 6'; field="prereg.json: canonical_manifest: hashes to " ;;
    counts) tamper 'j["counts"] = "2"'; field="prereg.json: counts: must be an object, found string" ;;
  esac
  check "$edit: plan refuses" expect_rc 1 "$kv" plan "$d/study.toml"
  check "$edit: plan names the field" contains "$work/err.txt" "$field"
  check "$edit: run refuses" expect_rc 1 "$kv" run "$d/study.toml"
  check "$edit: run names the field" contains "$work/err.txt" "$field"
  check "$edit: run created no shard" test ! -e "$d/results/shards"
  check "$edit: reduce refuses" expect_rc 1 "$kv" reduce "$d/results"
  check "$edit: reduce names the field" contains "$work/err.txt" "$field"
  check "$edit: reduce wrote no report" test ! -e "$d/results/report"
done

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
