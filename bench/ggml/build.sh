#!/usr/bin/env bash
# Builds ggml_kernel_bench against the ggml that the installed llama-cpp-python
# wheel ships (ci/llama_cpp.sh), with headers from the same release's sdist
# (ci/fetch_test_data.sh caches it). Prints the binary's path.
# Usage: bench/ggml/build.sh [out-dir]   (default ~/.cache/ferrox/ggml-bench)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${FERROX_CACHE_DIR:-$HOME/.cache/ferrox}
out=${1:-$cache/ggml-bench}
lib=$(python3 -c 'import llama_cpp, os; print(os.path.join(os.path.dirname(llama_cpp.__file__), "lib"))')
version=$(python3 -c 'import llama_cpp; print(llama_cpp.__version__)')
sdist=$cache/sdist/llama_cpp_python-$version.tar.gz
[ -f "$sdist" ] || { echo "no $sdist: run ci/fetch_test_data.sh" >&2; exit 1; }
mkdir -p "$out"
if [ ! -d "$out/include-$version" ]; then
  tmp=$(mktemp -d)
  tar xzf "$sdist" -C "$tmp" --wildcards '*/vendor/llama.cpp/ggml/include/*'
  mv "$tmp"/*/vendor/llama.cpp/ggml/include "$out/include-$version"
  rm -rf "$tmp"
fi
cc -O2 -Wall -Wextra -I"$out/include-$version" "$here/ggml_kernel_bench.c" \
  -L"$lib" -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$lib" -lm -o "$out/ggml_kernel_bench"
echo "$out/ggml_kernel_bench"
