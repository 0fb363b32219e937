#!/usr/bin/env bash
# Makes llama.cpp (through llama-cpp-python) importable for the parity tests in
# tests/parity/, and fetches the vocab test data. Installs from the wheel cached
# in ~/.cache/ferrox/wheels, building the wheel there first if there is none
# (that build takes a long while on a small machine; it happens once).
# Idempotent and quiet: prints only on failure.
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${FERROX_CACHE_DIR:-$HOME/.cache/ferrox}"
# A folder of its own for wheels built without AMX (see the build below), so a
# cache holding an earlier AMX build is not reused.
wheels="$cache/wheels/no-amx"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"

installed_version() {
  "$python" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))' 2>/dev/null || true
}

if [[ "$(installed_version)" != "$version" ]]; then
  shopt -s nullglob
  found=("$wheels"/llama_cpp_python-"$version"-*.whl)
  if (( ${#found[@]} == 0 )); then
    mkdir -p "$wheels"
    log="$wheels/build-$version.log"
    # Native SIMD, but no AMX: on a CPU that has it, -march=native turns on
    # ggml's AMX matmul, which segfaults on the tiny test models (seen in
    # ggml_backend_amx_mul_mat). Explicit -mno flags win over -march=native;
    # --no-cache-dir: pip would otherwise hand back a wheel it built earlier.
    no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    # The sdist that fetch_templates.sh caches, when there: one download fewer.
    source="llama-cpp-python==$version"
    sdist="$cache/sdist/llama_cpp_python-$version.tar.gz"
    [[ -s "$sdist" ]] && source="$sdist"
    if ! CFLAGS="$no_amx" CXXFLAGS="$no_amx" \
        CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF" \
        "$python" -m pip wheel -q --no-cache-dir --no-deps "$source" -w "$wheels" >"$log" 2>&1; then
      echo "llama_cpp.sh: building the llama-cpp-python wheel failed; see $log" >&2
      exit 1
    fi
    found=("$wheels"/llama_cpp_python-"$version"-*.whl)
  fi
  # Its runtime dependencies (numpy, typing-extensions, diskcache, jinja2) come from PyPI.
  "$python" -m pip install -q --disable-pip-version-check "${found[0]}" >/dev/null
fi

"$python" -c 'import pytest' 2>/dev/null || "$python" -m pip install -q --disable-pip-version-check pytest >/dev/null
"$here/fetch_test_data.sh"
"$here/fetch_templates.sh"
