#!/usr/bin/env bash
# Builds the ferrox wheel from a CMake build's output and tests it installed:
#   1. stages python/ with the build's libferrox_core and CPU plugin (never the
#      CUDA plugin) in ferrox/_native/lib, laid out as an install is (lib/ and
#      lib/ferrox/plugins), plus the core's non-glibc libraries
#      (packaging/lib/bundle.sh, as the tarball bundles them) except libstdc++ and
#      libgcc_s, which every C++ host has and which must not shadow a newer one
#      another extension of the same process needs;
#   2. packs it with setuptools (nothing compiles; docs/python.md);
#   3. checks the wheel's files: the core, the CPU plugin, nothing CUDA;
#   4. installs it into a fresh virtualenv (system site-packages visible for pytest,
#      gguf and numpy; ferrox itself only from the wheel) and checks that importing
#      ferrox loads nothing outside the standard library;
#   5. runs python/tests there, outside the source tree.
# Usage: ci/python_wheel.sh [BUILD_DIR [PYTEST_ARGS...]]   (default build/ci; the core,
# ferrox_cpu and the ferrox CLI built). Writes BUILD_DIR/python/{stage,dist,venv}.
# Exits 77 (skipped) when the host cannot build a wheel.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$repo/build/ci}")
(($#)) && shift  # the rest goes to pytest
out=$build/python
python=${PYTHON:-python3}
if ! "$python" -c 'import setuptools.command.bdist_wheel' 2>/dev/null &&
  ! "$python" -c 'import wheel' 2>/dev/null; then
  echo "SKIP: python_wheel needs the wheel package or setuptools >= 70.1 (ci/install-deps.sh)"
  exit 77
fi

core=$(readlink -f "$build/lib/libferrox_core.so")
cpu=$build/lib/ferrox/plugins/libferrox_cpu.so
for f in "$core" "$cpu" "$build/CMakeCache.txt"; do
  [[ -f $f ]] || { echo "python_wheel: $f is missing (build the core, ferrox_cpu and ferrox)" >&2; exit 1; }
done

# 1. stage
rm -rf "$out/stage" "$out/dist" "$out/venv"
mkdir -p "$out/stage" "$out/dist"
cp -r "$repo/python/pyproject.toml" "$repo/python/setup.py" "$repo/python/README.md" \
  "$repo/python/ferrox" "$out/stage/"
rm -rf "$out/stage/ferrox/_native" "$out/stage/ferrox/__pycache__"
native=$out/stage/ferrox/_native
mkdir -p "$native/lib/ferrox/plugins" "$native/bin"
soname=$(readelf -d "$core" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
cp "$core" "$native/lib/$soname"
cp "$cpu" "$native/lib/ferrox/plugins/"   # the CPU plugin only: CUDA comes from the host
# shellcheck source=packaging/lib/bundle.sh
source "$repo/packaging/lib/bundle.sh"
bundle_shared_libraries "$native"
rm -f "$native"/lib/libstdc++.so.* "$native"/lib/libgcc_s.so.*
rmdir "$native/bin"
chmod 0755 "$native/lib/ferrox/plugins/libferrox_cpu.so"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
printf '# Written by ci/python_wheel.sh from the CMake project.\n__version__ = "%s"\n' \
  "$version" >"$out/stage/ferrox/_version.py"

# 2. pack (setuptools and wheel from this host: no download)
"$python" -m pip wheel -q --no-deps --no-build-isolation --wheel-dir "$out/dist" "$out/stage"
wheel=$(ls "$out"/dist/ferrox-*.whl)
echo "python_wheel: built $wheel ($(du -h "$wheel" | cut -f1))"

# 3. what it carries
"$python" - "$wheel" <<'PY'
import re, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
native = sorted(n for n in names if "/_native/" in n)
print("python_wheel: native files:", ", ".join(n.split("/_native/")[1] for n in native))
cuda = [n for n in names if re.search(r"cuda|cublas|nvrtc|nvidia", n, re.I)]
assert not cuda, f"the wheel must never carry CUDA: {cuda}"
assert "ferrox/_native/lib/ferrox/plugins/libferrox_cpu.so" in names, native
assert any(re.fullmatch(r"ferrox/_native/lib/libferrox_core\.so\.\d+", n) for n in names), native
assert re.search(r"-py3-none-linux_x86_64\.whl$", sys.argv[1]), sys.argv[1]
PY

# 4. a fresh virtualenv
# (without a pip of its own: ensurepip costs ~15 s here; this pip installs into it)
"$python" -m venv --without-pip --system-site-packages "$out/venv"
"$python" -m pip --python "$out/venv/bin/python" install -q --no-deps --no-index "$wheel"
"$out/venv/bin/python" - <<'PY'
import sys
before = set(sys.modules)
import ferrox
loaded = {m.split(".")[0] for m in set(sys.modules) - before}
outside = sorted(m for m in loaded if m != "ferrox" and m not in sys.stdlib_module_names)
assert not outside, f"importing ferrox loaded modules outside the standard library: {outside}"
print(f"python_wheel: ferrox {ferrox.__version__} (C API {ferrox.api_version}) from {ferrox.__file__}")
PY

# 5. the tests, from outside the source tree (so `import ferrox` is the wheel's)
FERROX_BIN=$(realpath "${FERROX_BIN:-$build/bin/ferrox}")
export FERROX_BIN FERROX_CLI_PLUGIN_DIR=$build/lib/ferrox/plugins
cd "$out"
export FERROX_TEST_INSTALLED=1 XDG_CONFIG_HOME=/nonexistent FERROX_CONFIG=
unset FERROX_PLUGIN_PATH FERROX_LIBRARY
exec "$out/venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$repo/python/tests" "$@"
