#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what ferrox needs, build
# it (Release), fetch Gemma 3 270M once, list the backends, and generate text.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# Paths relative to the checkout, so a fresh clone reuses the cache of an earlier one.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
bash ci/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
ferrox=build/release/bin/ferrox
model=$(bash ci/fetch-model.sh)

echo; echo "\$ ferrox backends"
"$ferrox" backends
echo; echo "\$ ferrox run -m $model -p 'The capital of France is' -n 48"
"$ferrox" run -m "$model" -p "The capital of France is" -n 48 --seed 1
