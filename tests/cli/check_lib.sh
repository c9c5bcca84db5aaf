#!/usr/bin/env bash
# Shared helpers of the shell end-to-end tests (sourced; expects $work to be set):
#   check NAME CMD...       counts CMD's success in $passed, prints and counts a failure
#   expect_rc WANT CMD...   runs CMD with stdout/stderr in $work/out.txt and $work/err.txt and
#                           succeeds when its exit code is WANT (else shows the first stderr lines)
#   expect_rc_in "A B" CMD... as expect_rc, succeeding for any of the listed exit codes
#   contains FILE TEXT      FILE holds TEXT (fixed string)
#   lacks FILE TEXT         FILE does not hold TEXT
#   start_cli_test BIN SRC WORK    sets $kv, $src (absolute) and $work (emptied, absolute)
#   make_tiny_hf_model DIR         a tiny HF model that plan accepts: the tiny Llama config
#                                  (vocab 1500, 4096 positions), the GPT-2-style BPE tokenizer and
#                                  weights matching the config (make_tiny_hf_weights.py)
#   write_tiny_study FILE MODEL_PATH FORMAT DTYPE TASKS LENGTH INSTANCES
#                                  a one-model, one-RULER-benchmark, knorm study manifest
#   start_model_cli_test KVAUDIT_BINARY SOURCE_DIR WORK_DIR
#                                  start_cli_test + the environment of model-running tests ($py)
#   write_backend_grid_study FILE OUTPUT_DIR NAME SEED SNAPKV_WINDOW
#                                  the tiny HF model in $work/tiny: RULER niah_single_1/2 at 512
#                                  tokens, random/knorm/snapkv at 0.5 and 0.75, both protocols,
#                                  both attention backends (112 cells)
# shellcheck disable=SC2154  # $work is set by the sourcing script (or start_cli_test)
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
expect_rc_in() {  # expect_rc_in "WANT1 WANT2" CMD...
  local wanted=$1
  shift
  "$@" >"$work/out.txt" 2>"$work/err.txt"
  local rc=$? w
  for w in $wanted; do [ "$rc" = "$w" ] && return 0; done
  echo "  exit $rc, wanted one of $wanted: $*" >&2
  sed 's/^/  stderr: /' "$work/err.txt" | head -5 >&2
  return 1
}
contains() { grep -qF -- "$2" "$1" || { echo "  '$1' lacks: $2" >&2; return 1; }; }
lacks() { ! grep -qF -- "$2" "$1" || { echo "  '$1' has: $2" >&2; return 1; }; }
start_cli_test() {  # start_cli_test KVAUDIT_BINARY SOURCE_DIR WORK_DIR
  # shellcheck disable=SC2034  # $kv is for the sourcing script
  kv=$(realpath "$1")
  src=$(realpath "$2")
  rm -rf "$3"
  mkdir -p "$3"
  work=$(realpath "$3")
}
start_model_cli_test() {  # start_model_cli_test KVAUDIT_BINARY SOURCE_DIR WORK_DIR
  # start_cli_test, plus what tests that run a model (also under mpirun) need: OpenBLAS's AVX-512
  # kernels and one thread (the kernels decide near-tied scores), Open MPI as root with
  # oversubscription, and $py: Debian's python3 with h5py (python3-h5py; a pyenv shim may hide it).
  start_cli_test "$1" "$2" "$3"
  export OMP_NUM_THREADS=1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # shellcheck disable=SC2034  # $py is for the sourcing script
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
}
make_tiny_hf_model() {  # make_tiny_hf_model DIR (needs $src)
  mkdir -p "$1"
  sed -e 's/"max_position_embeddings": 512/"max_position_embeddings": 4096/' \
    -e 's/"vocab_size": 300/"vocab_size": 1500/' \
    "$src/tests/golden/tiny_models/llama/f32/config.json" >"$1/config.json"
  cp "$src/tests/golden/tokenizers/bpe_gpt2/tokenizer.json" "$1/"
  python3 "$src/tests/cli/make_tiny_hf_weights.py" "$1"
}
write_tiny_study() {  # write_tiny_study FILE MODEL_PATH FORMAT DTYPE TASKS LENGTH INSTANCES
  cat >"$1" <<EOF
[study]
name = "cli-tiny"
seed = 5
output_dir = "results"

[[models]]
name = "tiny"
path = "$2"
format = "$3"
chat_template = "none"
dtype = "$4"

[[benchmarks]]
name = "r"
kind = "ruler"
tasks = $5
length = $6
instances = $7

[methods.knorm]

[[grids]]
name = "g"
benchmarks = ["r"]
methods = ["knorm"]
compression = [0.5]
protocols = ["query-aware"]
attention_backends = ["sdpa"]
EOF
}
tiny_ruler_study_head() {  # tiny_ruler_study_head OUTPUT_DIR NAME SEED INSTANCES (to stdout)
  # [study], the tiny HF model at $work/tiny and RULER niah_single_1/2 at 512 tokens.
  cat <<EOF
[study]
name = "$2"
seed = $3
output_dir = "$1"

[[models]]
name = "tiny"
path = "$work/tiny"
format = "hf"
chat_template = "none"
dtype = "f32"

[[benchmarks]]
name = "r"
kind = "ruler"
tasks = ["niah_single_1", "niah_single_2"]
length = 512
instances = $4

EOF
}
write_backend_grid_study() {  # write_backend_grid_study FILE OUTPUT_DIR NAME SEED SNAPKV_WINDOW
  {
    tiny_ruler_study_head "$2" "$3" "$4" 2
    cat <<EOF
[methods.random]
[methods.knorm]
[methods.snapkv]
window = $5

[[grids]]
name = "g"
benchmarks = ["r"]
methods = ["random", "knorm", "snapkv"]
compression = [0.5, 0.75]
protocols = ["query-aware", "query-agnostic"]
attention_backends = ["sdpa", "eager"]
EOF
  } >"$1"
}
