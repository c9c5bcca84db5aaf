#!/usr/bin/env bash
# End-to-end tests of the kvaudit CLI: exit codes, plan output, the preregistration lock, the
# malformed-manifest messages, and that nothing is written on error.
# Usage: cli_test.sh KVAUDIT_BINARY SOURCE_DIR WORK_DIR
set -u
kv=$(realpath "$1")
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
failures=0
passed=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
  else
    echo "FAIL: $name" >&2
    failures=$((failures + 1))
  fi
}
expect_rc() {  # expect_rc WANT CMD...
  local want=$1
  shift
  "$@" >"$work/out.txt" 2>"$work/err.txt"
  local rc=$?
  if [ "$rc" != "$want" ]; then
    echo "  exit $rc, wanted $want: $*" >&2
    sed 's/^/  stderr: /' "$work/err.txt" | head -5 >&2
    return 1
  fi
}
contains() { grep -qF -- "$2" "$1" || { echo "  '$1' lacks: $2" >&2; return 1; }; }

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
check "audit RULER count" contains "$work/out.txt" "cells = 3,900 x 74 = 288,600  (per backend: 650 x 3 models x 74 = 144,300)"
check "audit total" contains "$work/out.txt" "8,700 units, 643,800 cells"
check "audit missing path" contains "$work/err.txt" "models.llama-3.1-8b-instruct.path: model 'llama-3.1-8b-instruct': /path/to/Llama-3.1-8B-Instruct does not exist"
check "audit nothing written" test ! -e "$work/audit-out"

# Quickstart: plan writes the lock, a re-plan leaves it, a changed manifest is refused.
qs="$work/qs"
mkdir -p "$qs/manifests" "$qs/models/smollm2-135m-instruct"
cp "$src/manifests/quickstart.toml" "$qs/manifests/"
: >"$qs/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
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
check "run on the locked manifest says it cannot execute" expect_rc 2 "$kv" run "$qs/manifests/quickstart.toml"
check "run message" contains "$work/err.txt" "Nothing was run"
check "reduce without prereg" expect_rc 1 "$kv" reduce "$work/nothing-here"
check "reduce on a study without shards" expect_rc 1 "$kv" reduce "$qs/results/quickstart"
check "reduce says nothing ran" contains "$work/err.txt" "no shards directory"
check "generate says not yet" expect_rc 2 "$kv" generate ruler
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

# inspect: the reformatted manifest has the audit's hash.
check "inspect audit" expect_rc 0 "$kv" inspect "$audit"
h1=$(head -n 1 "$work/out.txt")
check "inspect reformatted" expect_rc 0 "$kv" inspect "$src/tests/manifest/fixtures/query-visibility-audit.reformatted.toml"
h2=$(head -n 1 "$work/out.txt")
check "same hash after reformatting" test "$h1" = "$h2"
check "inspect study dir" expect_rc 0 "$kv" inspect "$qs/results/quickstart"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
