#!/usr/bin/env bash
# tools/quickstart.sh — the README's main job on a fresh machine: installs everything, fetches the
# embedded default model (SmolLM2-135M-Instruct), builds, and plans the quickstart audit
# (manifests/quickstart.toml), writing its preregistration lock under results/quickstart/.
# Running the cells and reducing them arrive with the later issues; the script then goes on to
# `kvaudit run` and `kvaudit reduce` (docs/CLI.md).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
bash tools/setup.sh
./build/kvaudit plan manifests/quickstart.toml
echo
echo "quickstart: the study is preregistered in $here/results/quickstart/prereg.json"
