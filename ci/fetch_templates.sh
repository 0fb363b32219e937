#!/usr/bin/env bash
# Extracts the real chat templates llama.cpp collects (models/templates/*.jinja)
# from the llama-cpp-python sdist into a cache folder, for the Jinja conformance
# test (tests/template/). They are not our files, so they are never committed.
# Idempotent and quiet; shares the sdist download with fetch_test_data.sh.
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${FERROX_CACHE_DIR:-$HOME/.cache/ferrox}"
sdist_dir="$cache/sdist"
out="$cache/templates"
sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"

[[ -f "$out/.complete-$version" ]] && exit 0

if [[ ! -s "$sdist" ]]; then
  mkdir -p "$sdist_dir"
  python3 -m pip download -q --no-binary :all: --no-deps \
    "llama-cpp-python==$version" -d "$sdist_dir"
fi

rm -rf "$out.tmp" && mkdir -p "$out.tmp"
tar -xzf "$sdist" -C "$out.tmp" --strip-components=5 --wildcards \
  "llama_cpp_python-$version/vendor/llama.cpp/models/templates/*.jinja"
rm -rf "$out" && mv "$out.tmp" "$out"
touch "$out/.complete-$version"
