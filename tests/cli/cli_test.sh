#!/usr/bin/env bash
# End-to-end tests of the kvaudit CLI: exit codes, plan output, the preregistration lock, the
# malformed-manifest messages, `generate longbench` (sample data, malformed files, refusals), and
# that nothing is written on error.
# Usage: cli_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
kv=$(realpath "$1")
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

# --help and exit codes.
check "top-level help" expect_rc 0 "$kv" --help
for c in plan run reduce generate inspect stats version; do
  check "$c --help" expect_rc 0 "$kv" "$c" --help
  check "$c --help text" contains "$work/out.txt" "usage: kvaudit $c"
done
check "no command" expect_rc 1 "$kv"
check "unknown command" expect_rc 1 "$kv" frobnicate
check "unknown option" expect_rc 1 "$kv" plan --frob x.toml
check "version" expect_rc 0 "$kv" version
check "version names HDF5" contains "$work/out.txt" "HDF5            1.10"

# Malformed manifests: exit 1, the exact first message, nothing written (run in an empty dir).
for f in "$src"/tests/manifest/malformed/*.toml; do
  name=$(basename "$f" .toml)
  d="$work/malformed/$name"
  mkdir -p "$d"
  cp "$f" "$d/$name.toml"
  (cd "$d" && "$kv" plan "$name.toml" >out.txt 2>err.txt; echo $? >rc.txt)
  check "$name exit 1" test "$(cat "$d/rc.txt")" = 1
  check "$name message" contains "$d/err.txt" "$(head -n 1 "${f%.toml}.expected")"
  want=$(printf '%s\n' "$name.toml" err.txt out.txt rc.txt | sort | tr '\n' ' ')
  check "$name wrote nothing" test "$(ls -A "$d" | sort | tr '\n' ' ')" = "$want"
done

# A grid too large to plan is refused before any memory is spent on it.
sed -e 's/instances = 4/instances = 1000000/' -e 's/compression = \[0.5\]/compression = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]/' \
  -e 's/backends = \["sdpa"\]/backends = ["sdpa", "eager"]/' "$src/tests/manifest/valid_minimal.toml" >"$work/huge.toml"
check "huge grid refused" expect_rc 1 "$kv" plan "$work/huge.toml" --dry-run
check "huge grid message" contains "$work/err.txt" "cells, more than one study may plan (50000000); split it into several studies"

# The audit manifest: prints the expansion, reports the placeholder paths, writes nothing.
audit="$src/manifests/query-visibility-audit.toml"
check "audit plan exits 1 (missing paths)" expect_rc 1 "$kv" plan "$audit" --output-dir "$work/audit-out"
check "audit RULER formula" contains "$work/out.txt" "cells per unit = (9 methods x 4 compression ratios + 1 full-KV) x 2 protocols = 74"
check "audit RULER count" contains "$work/out.txt" "cells = 3,900 x 74 = 288,600  (per attention backend: 650 x 3 models x 74 = 144,300)"
check "audit total" contains "$work/out.txt" "8,700 units, 643,800 cells"
check "audit missing path" contains "$work/err.txt" "models.llama-3.1-8b-instruct.path: model 'llama-3.1-8b-instruct': /path/to/Llama-3.1-8B-Instruct does not exist"
check "audit nothing written" test ! -e "$work/audit-out"

# Quickstart with a placeholder model: plan opens every model header before writing the lock, so
# an empty model file is refused (exit 1, the file named) and nothing is written.
qs="$work/qs"
mkdir -p "$qs/manifests" "$qs/models/smollm2-135m-instruct"
cp "$src/manifests/quickstart.toml" "$qs/manifests/"
: >"$qs/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
check "plan refuses an unloadable model" expect_rc 1 "$kv" plan "$qs/manifests/quickstart.toml"
check "plan names the unloadable model" contains "$work/err.txt" "SmolLM2-135M-Instruct.Q4_1.gguf"
check "plan wrote no lock for it" test ! -e "$qs/results/quickstart/prereg.json"
check "reduce without prereg" expect_rc 1 "$kv" reduce "$work/nothing-here"

# The lock and `run` on SmolLM2: the quickstart manifest for the lock checks (nothing of it runs),
# a one-unit study for the runs.
smollm="$src/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -n "${KVAUDIT_CLI_SKIP_MODEL_RUNS:-}" ]; then
  echo "SKIP plan/run/reduce on SmolLM2: $KVAUDIT_CLI_SKIP_MODEL_RUNS"
elif [ -f "$smollm" ]; then
  ln -sf "$(realpath "$smollm")" "$qs/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
  check "quickstart plan" expect_rc 0 "$kv" plan "$qs/manifests/quickstart.toml"
  check "quickstart lock written" test -f "$qs/results/quickstart/prereg.json"
  check "quickstart prints lock" contains "$work/out.txt" "preregistered: wrote $qs/results/quickstart/prereg.json"
  sum1=$(sha256sum "$qs/results/quickstart/prereg.json")
  check "quickstart re-plan" expect_rc 0 "$kv" plan "$qs/manifests/quickstart.toml"
  check "quickstart re-plan unchanged" contains "$work/out.txt" "preregistered already"
  sed 's/compression = \[0.5, 0.75\]/compression = [0.5, 0.75, 0.9]/' "$qs/manifests/quickstart.toml" >"$qs/manifests/changed.toml"
  check "changed manifest refused" expect_rc 1 "$kv" plan "$qs/manifests/changed.toml"
  check "changed manifest message" contains "$work/err.txt" "already preregisters another manifest"
  check "lock untouched" test "$(sha256sum "$qs/results/quickstart/prereg.json")" = "$sum1"
  check "run refuses changed manifest" expect_rc 1 "$kv" run "$qs/manifests/changed.toml"
  check "run refusal message" contains "$work/err.txt" "differs from the preregistration"
  check "reduce on a study without shards" expect_rc 1 "$kv" reduce "$qs/results/quickstart"
  check "reduce says nothing ran" contains "$work/err.txt" "no shards directory"
  check "inspect study dir" expect_rc 0 "$kv" inspect "$qs/results/quickstart"

  one="$work/one-unit"
  mkdir -p "$one"
  cat >"$one/study.toml" <<TOML
[study]
name = "cli-one-unit"
seed = 3
output_dir = "results"

[[models]]
name = "smollm2-135m-instruct"
path = "$(realpath "$smollm")"
format = "gguf"
chat_template = "chatml"
dtype = "f32"

[[benchmarks]]
name = "ruler-512"
kind = "ruler"
tasks = ["niah_single_1"]
length = 512
instances = 1
essay = "builtin"

[methods.knorm]

[[grids]]
name = "one"
benchmarks = ["ruler-512"]
methods = ["knorm"]
compression = [0.5]
protocols = ["query-aware", "query-agnostic"]
attention_backends = ["sdpa"]
TOML
  check "one-unit plan" expect_rc 0 "$kv" plan "$one/study.toml"
  check "one-unit run" expect_rc 0 env OMP_NUM_THREADS=2 "$kv" run "$one/study.toml"
  check "run summary" contains "$work/err.txt" "4 cell(s) recorded now (ok 4, oom 0, error 0, excluded 0, abandoned 0); 4 of 4 cells recorded in all"
  check "shard published with its checksum" test -n "$(ls "$one"/results/shards/part-*.h5.sha256 2>/dev/null)"
  check "checksum verifies with sha256sum" bash -c "cd '$one/results/shards' && sha256sum -c --quiet part-*.h5.sha256"
  check "rerun has nothing left to do" expect_rc 0 "$kv" run "$one/study.toml"
  check "rerun says which device the rank uses" contains "$work/err.txt" "kvaudit run [rank 0]: device cpu ("
  check "rerun: 0 cells now, 4 in all" contains "$work/err.txt" "0 cell(s) recorded now (ok 0, oom 0, error 0, excluded 0, abandoned 0); 4 of 4 cells recorded in all"
  check "run --device bogus refused" expect_rc 1 "$kv" run "$one/study.toml" --device bogus
  check "run --device names the choices" contains "$work/err.txt" "--device: 'bogus' is not one of auto, cpu, cuda"
  check "run --device cpu" expect_rc 0 "$kv" run "$one/study.toml" --device cpu
  check "run --device cpu says so" contains "$work/err.txt" "device cpu (--device cpu)"
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "skip: 'run --device cuda without a GPU' (this machine has a GPU)"
  else
    check "run --device cuda without a GPU" expect_rc 1 "$kv" run "$one/study.toml" --device cuda
    if "$kv" version | grep -q '^CUDA engine  *built'; then
      why="--device cuda: no usable CUDA device: "
    else
      why="--device cuda: this kvaudit was built without the CUDA engine"
    fi
    check "run --device cuda says why" contains "$work/err.txt" "$why"
  fi
  check "run --retry-failed with nothing failed" expect_rc 0 "$kv" run "$one/study.toml" --retry-failed
  check "reduce of the complete study" expect_rc 0 "$kv" reduce "$one/results" --no-figures
  check "reduce counts every cell" contains "$work/out.txt" "4 of 4 preregistered cells recorded"
  # The records' costs (schema 5) and the report's cost section drawn from them.
  check "records carry the cells' costs" "${py:-/usr/bin/python3}" - "$one"/results/shards/part-*.h5 <<'PY'
import math, sys
import h5py
for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        assert int(f.attrs["schema_version"]) == 6, path
        rows = f["records"][...]
        devices = {v: k for k, v in h5py.check_enum_dtype(rows.dtype["device"]).items()}
        for row in rows:
            full = row["method_id"] == b"full"
            for step in ("prefill", "evict", "feed", "decode") + (() if full else ("select",)):
                assert row["cell_%s_ms" % step] > 0, (step, row["cell_%s_ms" % step])
            assert math.isnan(row["cell_select_ms"]) == full
            assert math.isnan(row["cell_extra_pass_ms"]), row["cell_extra_pass_ms"]
            assert row["peak_kv_bytes"] > row["kept_bytes"] > 0
            assert row["shared_costs"] & 1, row["shared_costs"]  # the prefill, shared by 4 cells
            assert devices[row["device"]] == "cpu" and row["threads"] > 0
            # Schema 6: no decode-time compression, one question per context.
            assert row["final_kv_bytes"] == row["peak_kv_bytes"], row["final_kv_bytes"]
            assert row["decode_compressions"] == 0 and row["question"] == 0
            assert row["n_questions"] == 1
PY
  check "report has the cost section" contains "$one/results/report/report.md" "## Cost"
  check "report has the cost table" contains "$one/results/report/report.md" "tables/cost.csv"
  # A flipped bit in the published shard (in a record's model name): run, reduce and inspect
  # refuse it, naming the file; --salvage-corrupt keeps the records whose digests still match.
  shard=$(ls "$one"/results/shards/part-*.h5 | head -n 1)
  cp "$shard" "$work/shard.bak"
  python3 - "$shard" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
at = data.rfind(b"smollm2-135m-instruct")  # a record's model string, in HDF5's global heap
data[at + 3] ^= 0x40
open(path, "wb").write(bytes(data))
PY
  check "run refuses a damaged shard" expect_rc 1 "$kv" run "$one/study.toml"
  check "run names the damaged shard" contains "$work/err.txt" "$shard: SHA-256 "
  check "reduce refuses a damaged shard" expect_rc 1 "$kv" reduce "$one/results" --no-figures
  check "reduce names the damaged shard" contains "$work/err.txt" "$shard: SHA-256 "
  check "inspect refuses a damaged shard" expect_rc 1 "$kv" inspect "$shard"
  check "reduce --salvage-corrupt goes on" expect_rc_in "0 3" "$kv" reduce "$one/results" --no-figures --salvage-corrupt
  check "reduce --salvage-corrupt says what it kept" contains "$work/out.txt" "salvaged"
  cp "$work/shard.bak" "$shard"
  check "restored shard reads again" expect_rc 0 "$kv" reduce "$one/results" --no-figures
else
  echo "SKIP plan/run/reduce on SmolLM2: $smollm is absent (tools/fetch_default_model.sh fetches it)"
fi
check "generate ruler without options" expect_rc 1 "$kv" generate ruler
check "generate ruler names --model" contains "$work/err.txt" "generate ruler: --model is required"
check "generate unknown benchmark" expect_rc 1 "$kv" generate squad
check "generate needs a prompt" expect_rc 1 "$kv" generate --model "$work/no-such-model.gguf"
check "generate missing model" expect_rc 1 "$kv" generate --model "$work/no-such-model.gguf" --prompt hi
check "generate missing model message" contains "$work/err.txt" "no-such-model.gguf does not exist"
printf 'GGUF\x01\x00\x00\x00' >"$work/v1.gguf"
check "generate malformed model" expect_rc 1 "$kv" generate --model "$work/v1.gguf" --prompt hi
check "generate malformed model names the file" contains "$work/err.txt" "v1.gguf"
smollm="$src/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$smollm" ]; then
  check "generate bad backend" expect_rc 1 "$kv" generate --model "$smollm" --prompt hi --backend flash
  check "generate bad template" expect_rc 1 "$kv" generate --model "$smollm" --prompt hi --chat-template jinja
  for backend in sdpa eager; do
    check "generate SmolLM2 ($backend)" expect_rc 0 "$kv" generate --model "$smollm" \
      --prompt "What is the capital of France?" --backend "$backend" --max-new-tokens 12 --json
    check "generate SmolLM2 answers ($backend)" contains "$work/out.txt" "Paris"
    check "generate SmolLM2 chat template ($backend)" contains "$work/out.txt" '"chat_template": "chatml"'
  done
else
  echo "SKIP generate on SmolLM2: $smollm is absent (tools/fetch_default_model.sh fetches it)"
fi

# generate longbench on the sample data (tests/golden/longbench/data, made-up records).
lbdata="$src/tests/golden/longbench/data"
gpt2="$src/tests/golden/tokenizers/bpe_gpt2/tokenizer.json"
lb="$work/longbench"
mkdir -p "$lb"
# validate_longbench FILE LIMIT TEMPLATE RULE TASK...: every line against its source record.
validate_longbench() {
  python3 - "$lbdata" "$@" <<'PY' >"$work/validate.txt" 2>&1 || { sed 's/^/  /' "$work/validate.txt" >&2; return 1; }
import json, sys
data, path, limit, template, rule, tasks = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6:]
raw = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}
budget = {"hotpotqa": 32, "trec": 64, "qasper": 128, "qasper_e": 128, "gov_report": 512}
keys = ["task", "dataset", "_id", "line", "index", "length", "answers", "all_classes",
        "max_new_tokens", "kvpress_max_new_tokens", "chat_template", "chat_template_applied",
        "chat_rule", "context", "question", "answer_prefix", "prompt", "prompt_add_special_tokens",
        "tokens"]
token_keys = ["tokenizer", "max_prompt_tokens", "original_prompt", "final_prompt", "truncated",
              "split_context", "split_question", "split_suffix"]
lines = open(path, encoding="utf-8").read().splitlines()
expected = []
for t in tasks:
    for n, text in enumerate(open(f"{data}/{t}.jsonl", encoding="utf-8").read().splitlines()):
        expected.append((t, n, json.loads(text)))
assert len(lines) == len(expected), f"{len(lines)} lines, {len(expected)} records"
truncated = 0
records = [json.loads(text) for text in lines]
# The chat template's overhead in tokens, seen on untruncated templated records.
overhead = max([j["tokens"]["final_prompt"] - j["tokens"]["original_prompt"] for j in records
                if j["chat_template_applied"] and not j["tokens"]["truncated"]], default=None)
for j, (task, n, rec) in zip(records, expected):
    assert list(j) == keys, list(j)
    assert list(j["tokens"]) == token_keys, list(j["tokens"])
    assert (j["task"], j["dataset"], j["_id"], j["line"], j["index"]) == (task, rec["dataset"], rec["_id"], n + 1, n), j["_id"]
    assert j["answers"] == rec["answers"] and j["all_classes"] == rec["all_classes"] and j["length"] == rec["length"]
    base = task[:-2] if task.endswith("_e") else task
    assert j["max_new_tokens"] == budget[base] and j["kvpress_max_new_tokens"] == budget[base] + 20
    applied = template != "none" and (rule == "always" or base not in raw)
    assert j["chat_template_applied"] == applied and j["chat_rule"] == rule, j["_id"]
    assert j["chat_template"] == (template if applied else "none")
    assert j["prompt_add_special_tokens"] == (not applied)
    t = j["tokens"]
    assert t["max_prompt_tokens"] == limit and t["truncated"] == (t["original_prompt"] > limit), j["_id"]
    truncated += t["truncated"]
    if not applied:  # the raw LongBench prompt is kvpress's three parts joined
        assert j["context"] + j["question"] + j["answer_prefix"] == j["prompt"], j["_id"]
    else:
        assert j["question"] in j["prompt"] and j["prompt"].count(j["context"][-40:]) >= 1
    if not t["truncated"]:
        assert rec["context"] in j["context"], j["_id"]
        assert t["final_prompt"] >= t["original_prompt"] - 1, j["_id"]
    else:
        assert rec["context"] not in j["context"] and len(j["context"]) < len(rec["context"]) + 400
        if not j["chat_template_applied"]:  # a few tokens at the seam
            assert t["final_prompt"] <= limit + 4, j["_id"]
        elif overhead is not None:  # and the template's overhead
            assert t["final_prompt"] <= limit + overhead + 4, j["_id"]
    assert min(t["split_context"], t["split_suffix"]) > 0
print(truncated)
PY
}
check "longbench without options" expect_rc 1 "$kv" generate longbench
check "longbench without options message" contains "$work/err.txt" "generate longbench: --model (or --tokenizer) is required"
check "longbench tokenizer needs a limit" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" \
  --data "$lbdata" --tasks hotpotqa --out "$lb/nolimit.jsonl"
check "longbench tokenizer needs a limit message" contains "$work/err.txt" "--max-prompt-tokens is required with --tokenizer"
check "longbench tokenizer happy path" expect_rc 0 "$kv" generate longbench --tokenizer "$gpt2" \
  --data "$lbdata" --tasks hotpotqa,trec,qasper_e --max-prompt-tokens 400 --out "$lb/gpt2.jsonl"
cp "$work/out.txt" "$lb/gpt2.summary"
check "longbench summary limit" contains "$lb/gpt2.summary" "prompt limit (pred.py max_length): 400 tokens (--max-prompt-tokens)"
check "longbench summary template" contains "$lb/gpt2.summary" "chat template: none (rule longbench"
check "longbench summary total" contains "$lb/gpt2.summary" "kvaudit generate longbench: 8 instances (3 tasks"
check "longbench lines match the records" validate_longbench "$lb/gpt2.jsonl" 400 none longbench hotpotqa trec qasper_e
check "longbench some truncated" test "$(cat "$work/validate.txt")" -gt 0
# The summary's truncated column agrees with the file, task by task.
for t in hotpotqa trec qasper_e; do
  n=$(grep -c "\"task\":\"$t\".*\"truncated\":true" "$lb/gpt2.jsonl")
  check "longbench summary truncated $t" test "$(awk -v t="$t" '$1 == t {print $3}' "$lb/gpt2.summary")" = "$n"
done
sum_lb=$(sha256sum <"$lb/gpt2.jsonl")
check "longbench refuses to overwrite" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" \
  --data "$lbdata" --tasks hotpotqa --max-prompt-tokens 400 --out "$lb/gpt2.jsonl"
check "longbench overwrite message" contains "$work/err.txt" "gpt2.jsonl already exists; kvaudit never overwrites it"
check "longbench output untouched" test "$(sha256sum <"$lb/gpt2.jsonl")" = "$sum_lb"
check "longbench deterministic run" expect_rc 0 "$kv" generate longbench --tokenizer "$gpt2" \
  --data "$lbdata" --tasks hotpotqa,trec,qasper_e --max-prompt-tokens 400 --out "$lb/gpt2-again.jsonl"
check "longbench byte-identical" cmp -s "$lb/gpt2.jsonl" "$lb/gpt2-again.jsonl"
check "longbench range" expect_rc 0 "$kv" generate longbench --tokenizer "$gpt2" --data "$lbdata" \
  --tasks trec --max-prompt-tokens 400 --first 1 --instances 5 --out "$lb/range.jsonl"
check "longbench range = records 1..2" test "$(cat "$lb/range.jsonl")" = "$(grep '"task":"trec"' "$lb/gpt2.jsonl" | sed -n 2,3p)"
check "longbench range note" contains "$work/out.txt" "note: trec has 3 records; took indices 1..2 (2, not 5)"
check "longbench first beyond the file" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" \
  --data "$lbdata" --tasks trec --max-prompt-tokens 400 --first 3 --out "$lb/beyond.jsonl"
check "longbench first beyond message" contains "$work/err.txt" "--first 3: $lbdata/trec.jsonl has 3 records"
for m in "not_json narrativeqa 2 not valid JSON" "duplicate_id narrativeqa 3 field '_id': 'kvaudit-narrativeqa-00' appears twice" \
  "trec_without_classes trec 1 field 'all_classes'"; do
  read -r case task line what <<<"$m"
  check "longbench malformed $case" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" \
    --data "$src/tests/golden/longbench/malformed/$case" --tasks "$task" --max-prompt-tokens 400 --out "$lb/$case.jsonl"
  check "longbench malformed $case names file:line" contains "$work/err.txt" "malformed/$case/$task.jsonl:$line: $what"
  check "longbench malformed $case wrote nothing" test ! -e "$lb/$case.jsonl"
done
check "longbench unknown task" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" --data "$lbdata" \
  --tasks hotpotqa,frobnicate --max-prompt-tokens 400 --out "$lb/unknown.jsonl"
check "longbench unknown task message" contains "$work/err.txt" "longbench: unknown task 'frobnicate'; LongBench tasks are: narrativeqa,"
check "longbench unknown task wrote nothing" test ! -e "$lb/unknown.jsonl"
check "longbench repeated task" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" --data "$lbdata" \
  --tasks trec,trec --max-prompt-tokens 400 --out "$lb/twice.jsonl"
check "longbench task file missing" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" --data "$lbdata" \
  --tasks narrativeqa,lsht --max-prompt-tokens 400 --out "$lb/missing.jsonl"
check "longbench task file missing names it" contains "$work/err.txt" "lsht.jsonl"
check "longbench missing file wrote nothing" test ! -e "$lb/missing.jsonl"
check "longbench limit below 2" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" --data "$lbdata" \
  --tasks trec --max-prompt-tokens 1 --out "$lb/one.jsonl"
check "longbench bad rule" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" --data "$lbdata" \
  --tasks trec --max-prompt-tokens 400 --chat-rule sometimes --out "$lb/rule.jsonl"
check "longbench ruler option refused" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" --data "$lbdata" \
  --tasks trec --max-prompt-tokens 400 --length 4096 --out "$lb/length.jsonl"
check "longbench ruler option message" contains "$work/err.txt" "generate longbench: --length does not apply here"
check "longbench data not a directory" expect_rc 1 "$kv" generate longbench --tokenizer "$gpt2" \
  --data "$lbdata/trec.jsonl" --tasks trec --max-prompt-tokens 400 --out "$lb/notdir.jsonl"
# --model: an HF directory (the tiny Llama's config, max_position_embeddings 512, and the GPT-2-style
# tokenizer) gives the default limit 512 - (64 + 20) for hotpotqa + trec; --chat-template chatml
# --chat-rule always wraps every task.
tiny="$lb/tiny-model"
mkdir -p "$tiny"
cp "$src/tests/golden/tiny_models/llama/f32/config.json" "$gpt2" "$tiny/"
check "longbench both model and tokenizer" expect_rc 1 "$kv" generate longbench --model "$tiny" --tokenizer "$gpt2" \
  --data "$lbdata" --tasks trec --out "$lb/both.jsonl"
check "longbench default limit" expect_rc 0 "$kv" generate longbench --model "$tiny" --data "$lbdata" \
  --tasks hotpotqa,trec --chat-template chatml --chat-rule always --out "$lb/tiny.jsonl"
check "longbench default limit printed" contains "$work/out.txt" "prompt limit (pred.py max_length): 428 tokens (max_position_embeddings 512 - largest kvpress max_new_tokens 84 of the chosen tasks)"
check "longbench over window printed" contains "$work/out.txt" "over window: prompt + max_new_tokens > max_position_embeddings 512"
check "longbench default limit lines" validate_longbench "$lb/tiny.jsonl" 428 chatml always hotpotqa trec
if [ -f "$smollm" ]; then
  check "longbench SmolLM2" expect_rc 0 "$kv" generate longbench --model "$smollm" --data "$lbdata" \
    --tasks hotpotqa,trec,gov_report --out "$lb/smollm.jsonl"
  check "longbench SmolLM2 template" contains "$work/out.txt" "chat template: chatml (rule longbench"
  check "longbench SmolLM2 limit" contains "$work/out.txt" "prompt limit (pred.py max_length): 7660 tokens (max_position_embeddings 8192"
  check "longbench SmolLM2 lines" validate_longbench "$lb/smollm.jsonl" 7660 chatml longbench hotpotqa trec gov_report
  check "longbench SmolLM2 small limit" expect_rc 0 "$kv" generate longbench --model "$smollm" --data "$lbdata" \
    --tasks hotpotqa,trec,gov_report --max-prompt-tokens 300 --out "$lb/smollm-300.jsonl"
  check "longbench SmolLM2 small limit lines" validate_longbench "$lb/smollm-300.jsonl" 300 chatml longbench hotpotqa trec gov_report
  check "longbench SmolLM2 truncates" test "$(cat "$work/validate.txt")" -gt 0
else
  echo "SKIP generate longbench on SmolLM2: $smollm is absent (tools/fetch_default_model.sh fetches it)"
fi

# inspect: the reformatted manifest has the audit's hash.
check "inspect audit" expect_rc 0 "$kv" inspect "$audit"
h1=$(head -n 1 "$work/out.txt")
check "inspect reformatted" expect_rc 0 "$kv" inspect "$src/tests/manifest/fixtures/query-visibility-audit.reformatted.toml"
h2=$(head -n 1 "$work/out.txt")
check "same hash after reformatting" test "$h1" = "$h2"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
