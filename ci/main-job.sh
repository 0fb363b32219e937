#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what building ferrox needs,
# build the CLI and the plugins this host can use (Release, no tests), fetch
# Gemma 3 270M once (while the build runs), list the backends, and generate text.
# The tests, every CUDA architecture and the packages are ci/test.sh's work.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout, so a fresh clone reuses the cache of an earlier one.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
bash ci/install-deps.sh --build-only
echo "main-job: dependencies ready ($((SECONDS - started)) s)" >&2

# The download needs the network, the build the cores: run them side by side.
model_path=$(mktemp)
trap 'rm -f "$model_path"' EXIT
bash ci/fetch-model.sh >"$model_path" &
fetch_pid=$!

# The CUDA plugin only where a GPU can run it, and then for that GPU alone.
read -r cuda cuda_archs < <(bash ci/detect-cuda-arch.sh)
echo "main-job: CUDA plugin: $cuda${cuda_archs:+ (sm_$cuda_archs)}" >&2
# A unity build: each target's files compiled in batches of 8, so the headers
# they share (CLI11, nlohmann-json, fmt, Beast) are compiled once per batch, not
# once per file: cold, 4.3 CPU-minutes instead of 11.1 (README, "Building by hand").
cmake --preset release -DFERROX_BUILD_TESTS=OFF -DCMAKE_UNITY_BUILD=ON -DFERROX_CUDA="$cuda" \
  ${cuda_archs:+-DFERROX_CUDA_ARCHS="$cuda_archs"} >/dev/null
cmake --build --preset release -j "$(nproc)"
echo "main-job: build done ($((SECONDS - started)) s)" >&2
wait "$fetch_pid"
model=$(cat "$model_path")

ferrox=build/release/bin/ferrox
echo; echo "\$ ferrox backends"
"$ferrox" backends
echo; echo "\$ ferrox run -m $model -p 'The capital of France is' -n 48"
"$ferrox" run -m "$model" -p "The capital of France is" -n 48 --seed 1
echo "main-job: first answer after $((SECONDS - started)) s" >&2
