#!/usr/bin/env bash
# Input errors and size limits of kvaudit stats, reduce and generate (issue 16, items 10 and 11):
#  * stats kmax / certify answer at n = 1e10 and n = 2^53 (K* checked by its defining property
#    p(K*) <= delta < p(K*+1), each call under a 60 s timeout: the old walk up the cdf took minutes
#    at 1e10 and certify ran out of memory), and n > 2^53 is refused naming the bound;
#  * a negative or non-numeric --seed (stats bootstrap, reduce, generate ruler) is refused naming
#    the option instead of wrapping to 2^64 - 1;
#  * stats cp --match with LOW > HIGH or outside [0, 1] is refused naming --match;
#  * generate refuses a tokenizer whose ids exceed the model's vocab_size (naming the tokenizer
#    file, its largest id and vocab_size), refuses a prompt that fills max_position_embeddings, and
#    stops at max_position_embeddings with a warning. Models: the tiny llama golden (HF directory,
#    vocab 300) with the committed GPT-2-style tokenizer (1500 ids) or a byte-level tokenizer
#    written here (256 ids).
# Usage: cli_input_errors_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
start_cli_test "$1" "$2" "$3"
python=$(command -v python3)

# json_ok FILE EXPR: the Python expression EXPR holds for j = the JSON object in FILE.
json_ok() {
  "$python" -c 'import json, sys
j = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
print("  " + sys.argv[2] + ": " + str(j), file=sys.stderr) if not ok else None
sys.exit(0 if ok else 1)' "$1" "$2"
}

# --- stats kmax / certify at huge n -------------------------------------------------------------
kstar_ok='(j["k_star"] is not None and j["p_k_star"] <= j["delta"] < j["p_k_star_plus_1"]
           and 0 <= j["k_star"] < j["violation_cap"])'
for n in 10000000000 9007199254740992; do
  for eps in 0.05 0.1; do
    check "stats kmax n=$n eps=$eps" expect_rc 0 timeout 60 "$kv" stats kmax --n "$n" \
      --epsilon "$eps" --delta 0.05 --json
    check "stats kmax n=$n eps=$eps: p(K*) <= delta < p(K*+1)" json_ok "$work/out.txt" "$kstar_ok"
  done
done
check "stats kmax n=1e10 value" expect_rc 0 "$kv" stats kmax --n 10000000000 --epsilon 0.05 \
  --delta 0.05 --json
check "stats kmax n=1e10 K*" json_ok "$work/out.txt" 'j["k_star"] == 499964151'
check "stats kmax table n=2^53" expect_rc 0 timeout 60 "$kv" stats kmax --n 9007199254740992 \
  --epsilon 0.05 --delta 0.05
check "stats kmax table n=2^53 prints K*" contains "$work/out.txt" "K*        "
check "stats kmax n=2^53+1 refused" expect_rc 1 timeout 60 "$kv" stats kmax --n 9007199254740993 \
  --epsilon 0.05 --delta 0.05
check "stats kmax n=2^53+1 names the bound" contains "$work/err.txt" \
  "stats kmax: --n must be ≤ 2^53 = 9007199254740992"
check "stats kmax n=int64 max refused" expect_rc 1 timeout 60 "$kv" stats kmax \
  --n 9223372036854775807 --epsilon 0.05 --delta 0.05

check "stats kmax n=1e10 for certify" expect_rc 0 "$kv" stats kmax --n 10000000000 \
  --epsilon 0.05 --delta 0.05 --json
kstar=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["k_star"])' \
  "$work/out.txt")
check "stats certify n=1e10" expect_rc 0 timeout 60 "$kv" stats certify --n 10000000000 \
  --epsilon 0.05 --delta 0.05 --violations "0,$kstar,$((kstar + 1)),7" --json
check "stats certify n=1e10 decision" json_ok "$work/out.txt" \
  '(j["selected"] == 2 and j["k_star"] == '"$kstar"'
    and [c["certified"] for c in j["candidates"]] == [True, True, False, False]
    and j["candidates"][3]["tested"] is False and j["plug_in"] == 4)'
check "stats certify n=2^53" expect_rc 0 timeout 60 "$kv" stats certify --n 9007199254740992 \
  --epsilon 0.5 --delta 0.05 --violations 0,4503599627370495
check "stats certify n=2^53 table" contains "$work/out.txt" "decision: candidate 1"
check "stats certify n=2^53+1 refused" expect_rc 1 timeout 60 "$kv" stats certify \
  --n 9007199254740993 --epsilon 0.05 --delta 0.05 --violations 0
check "stats certify n=2^53+1 names the bound" contains "$work/err.txt" "--n must be ≤ 2^53"
check "stats cp n=2^53+1 refused" expect_rc 1 timeout 60 "$kv" stats cp --x 1 --n 9007199254740993

# --- seeds --------------------------------------------------------------------------------------
printf '1\n0\n1\n' >"$work/a.txt"
printf '0\n0\n1\n' >"$work/b.txt"
for seed in -1 abc 1.5 18446744073709551616 " 3"; do
  check "stats bootstrap --seed '$seed' refused" expect_rc 1 "$kv" stats bootstrap \
    --a "$work/a.txt" --b "$work/b.txt" --resamples 10 "--seed=$seed"
  check "stats bootstrap --seed '$seed' names --seed" contains "$work/err.txt" \
    "stats bootstrap: --seed '$seed'"
  check "reduce --seed '$seed' refused" expect_rc 1 "$kv" reduce "$work/no-such-study" \
    "--seed=$seed"
  check "reduce --seed '$seed' names --seed" contains "$work/err.txt" "--seed '$seed'"
done
check "stats bootstrap --seed -1 (separate word)" expect_rc 1 "$kv" stats bootstrap \
  --a "$work/a.txt" --b "$work/b.txt" --resamples 10 --seed -1
check "stats bootstrap --seed -1 says negative" contains "$work/err.txt" \
  "--seed '-1': a seed must not be negative"
check "reduce --seed -1 (separate word)" expect_rc 1 "$kv" reduce "$work/no-such-study" --seed -1
check "reduce --seed -1 says negative" contains "$work/err.txt" \
  "--seed '-1': a seed must not be negative"
check "stats bootstrap largest seed" expect_rc 0 "$kv" stats bootstrap --a "$work/a.txt" \
  --b "$work/b.txt" --resamples 10 --seed 18446744073709551615 --json
check "stats bootstrap largest seed echoed" json_ok "$work/out.txt" \
  'j["seed"] == 18446744073709551615'
tiny="$src/tests/golden/tiny_models/llama/f32"
check "generate ruler --seed -1 refused" expect_rc 1 "$kv" generate ruler --model "$tiny" \
  --length 1000 --tasks niah_single_1 --instances 1 --out "$work/r.jsonl" --seed=-1
check "generate ruler --seed -1 names --seed" contains "$work/err.txt" \
  "generate ruler: --seed '-1'"

# --- stats cp --match ---------------------------------------------------------------------------
for match in 0.9,0.1 0.1,1.5 -0.1,0.5; do
  check "stats cp --match $match refused" expect_rc 1 "$kv" stats cp --x 29 --n 100 \
    --match "$match"
  check "stats cp --match $match names --match" contains "$work/err.txt" "stats cp: --match $match"
done
check "stats cp --match LOW > HIGH says so" expect_rc 1 "$kv" stats cp --x 29 --n 100 \
  --match 0.471,0.146
check "stats cp --match LOW > HIGH message" contains "$work/err.txt" "LOW must not exceed HIGH"
check "stats cp --match equal bounds allowed" expect_rc 0 "$kv" stats cp --x 0 --n 100 \
  --match 0.0,0.0

# --- generate: tokenizer vs vocab_size, max_position_embeddings -----------------------------------
# mk_model DIR MAX_POSITIONS: the tiny llama (vocab 300) with MAX_POSITIONS and no eos id.
mk_model() {
  mkdir -p "$1"
  ln -s "$tiny/model.safetensors" "$1/model.safetensors"
  "$python" -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["max_position_embeddings"] = int(sys.argv[3])
c["eos_token_id"] = None
json.dump(c, open(sys.argv[2], "w"), indent=2)' "$tiny/config.json" "$1/config.json" "$2"
}

big="$work/big-tokenizer"
mk_model "$big" 512
cp "$src/tests/golden/tokenizers/bpe_gpt2/tokenizer.json" "$big/tokenizer.json"
check "generate: tokenizer beyond vocab_size refused" expect_rc 1 "$kv" generate --model "$big" \
  --prompt hi --max-new-tokens 2
check "generate: names the tokenizer file" contains "$work/err.txt" "$big/tokenizer.json"
check "generate: names the largest id" contains "$work/err.txt" "largest token id is 1499"
check "generate: names vocab_size" contains "$work/err.txt" "has vocab_size 300"
check "generate: not an internal error" lacks "$work/err.txt" "internal error"

# A byte-level BPE tokenizer with 256 ids (no merges) fits vocab_size 300.
small_tokenizer() {
  "$python" -c 'import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): i for i, c in enumerate(cs)}
level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": level, "post_processor": None, "decoder": level,
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": []}}, open(sys.argv[1], "w"))' "$1"
}
short="$work/short-window"
mk_model "$short" 24
small_tokenizer "$short/tokenizer.json"
check "generate: prompt beyond max_position_embeddings refused" expect_rc 1 "$kv" generate \
  --model "$short" --prompt "this prompt is longer than twenty-four bytes" --max-new-tokens 2
check "generate: prompt refusal names the window" contains "$work/err.txt" \
  "--prompt: the prompt is 44 tokens, which leaves no room in the model's \
max_position_embeddings 24"
check "generate: prompt filling the window refused" expect_rc 1 "$kv" generate --model "$short" \
  --prompt "exactly twenty-four byte" --max-new-tokens 1
check "generate: stops at max_position_embeddings" expect_rc 0 "$kv" generate --model "$short" \
  --prompt "hello world" --max-new-tokens 64 --json
check "generate: stop warning on stderr" contains "$work/err.txt" \
  "warning: stopped after 13 new tokens at the model's max_position_embeddings 24"
check "generate: 11 + 13 tokens, flagged" json_ok "$work/out.txt" \
  '(len(j["prompt_ids"]) == 11 and len(j["generated_ids"]) == 13
    and j["stopped_at_max_position_embeddings"] and not j["stopped_on_eos"])'
check "generate: within the window, no warning" expect_rc 0 "$kv" generate --model "$short" \
  --prompt "hello world" --max-new-tokens 13 --json
check "generate: no warning within the window" lacks "$work/err.txt" "warning"
check "generate: 13 tokens, not flagged" json_ok "$work/out.txt" \
  'len(j["generated_ids"]) == 13 and not j["stopped_at_max_position_embeddings"]'

echo "cli_input_errors: $passed passed, $failures failed"
[ "$failures" -eq 0 ]
