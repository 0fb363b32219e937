#!/usr/bin/env bash
# Build the three Debian packages (ferrox, ferrox-cuda, libferrox-dev) from
# this tree into <build-dir>/packages.
#
#   packaging/build-debs.sh [BUILD_DIR] [VERSION]
#
# BUILD_DIR defaults to build/deb; VERSION (X.Y.Z) overrides the project's
# version (the upgrade test builds 0.1.1 this way). Environment:
#   FERROX_CUDA        AUTO|ON|OFF (default ON: a release ships ferrox-cuda)
#   FERROX_CUDA_ARCHS  SM list; default: the project's (75;80;86;89;90). The
#                      tests pass 80 to save build time.
#   JOBS               parallel build jobs (default 2)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build/deb}
version=${2:-}

# A unity build, as ci/main-job.sh builds: a package build compiles from cold
# more often than not, and CI's packaging checks then compile the batches the
# main job compiles, so a name two files both define at file scope fails here.
args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERROX_BUILD_TESTS=OFF -DCMAKE_UNITY_BUILD=ON
      -DCMAKE_INSTALL_PREFIX=/usr
      -DFERROX_CUDA="${FERROX_CUDA:-ON}"
      -DCMAKE_PROJECT_INCLUDE="$root/packaging/cmake/VersionOverride.cmake"
      -DFERROX_VERSION_OVERRIDE="$version")
[[ -n ${FERROX_CUDA_ARCHS:-} ]] && args+=(-DFERROX_CUDA_ARCHS="$FERROX_CUDA_ARCHS")
if command -v ccache >/dev/null; then
    args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
           -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# Reproducible changelog dates and archive times.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}

mkdir -p "$(dirname "$build")"
cmake -S "$root" -B "$build" "${args[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "${JOBS:-2}"
rm -f "$build"/packages/*.deb
(cd "$build" && cpack -G DEB)
ls -l "$build"/packages/*.deb
