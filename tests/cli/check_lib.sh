#!/usr/bin/env bash
# Shared helpers of the shell end-to-end tests (sourced; expects $work to be set):
#   check NAME CMD...       counts CMD's success in $passed, prints and counts a failure
#   expect_rc WANT CMD...   runs CMD with stdout/stderr in $work/out.txt and $work/err.txt and
#                           succeeds when its exit code is WANT (else shows the first stderr lines)
#   expect_rc_in "A B" CMD... as expect_rc, succeeding for any of the listed exit codes
#   contains FILE TEXT      FILE holds TEXT (fixed string)
#   lacks FILE TEXT         FILE does not hold TEXT
# shellcheck disable=SC2154  # $work is set by the sourcing script
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
