#!/usr/bin/env bash
# Build a relocatable ferrox tarball: bin/ lib/ lib/ferrox/plugins/ etc/ferrox/
# share/, with every non-glibc shared library the binaries need bundled into
# lib/, so it runs on a glibc >= 2.36 x86-64 host with no Debian dev packages
# (e.g. the GPU machine a device check carries it to).
#
#   packaging/make-tarball.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR defaults to build/tarball, OUT_DIR to BUILD_DIR. Environment:
# FERROX_CUDA (default AUTO), FERROX_CUDA_ARCHS (default: the project's), JOBS.
# Prints the tarball's path last.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build/tarball}
out=${2:-$build}
max_bytes=$((64 * 1024 * 1024))

# Prefix /usr/local, libdir lib, installed with --prefix <tree>: the tree is
# bin/ lib/ lib/ferrox/plugins/ etc/ferrox/ share/. (Prefix / would not do:
# GNUInstallDirs turns it into usr/bin, usr/lib.) The compiled-in folders are
# /usr/local/lib/ferrox/plugins and /usr/local/etc/ferrox, as if unpacked
# there; anywhere else, plugins are found beside the exe (<exe>/../lib/ferrox/
# plugins) and the config with --config or $FERROX_CONFIG. The exe's RPATH is
# $ORIGIN/../lib (top-level CMAKE_INSTALL_RPATH); --disable-new-dtags makes it
# a DT_RPATH, which -- unlike DT_RUNPATH -- also serves the bundled libraries'
# own dependencies (libspdlog -> libfmt), so they need no patching.
args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERROX_BUILD_TESTS=OFF
      -DCMAKE_INSTALL_PREFIX=/usr/local -DCMAKE_INSTALL_LIBDIR=lib
      -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags
      -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags
      -DFERROX_CUDA="${FERROX_CUDA:-AUTO}")
[[ -n ${FERROX_CUDA_ARCHS:-} ]] && args+=(-DFERROX_CUDA_ARCHS="$FERROX_CUDA_ARCHS")
if command -v ccache >/dev/null; then
    args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
           -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}

mkdir -p "$(dirname "$build")" "$out"
cmake -S "$root" -B "$build" "${args[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "${JOBS:-2}"

version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
name="ferrox-$version-linux-x86_64"
stage="$build/stage"
tree="$stage/$name"
rm -rf "$stage"
for component in ferrox cuda; do
    cmake --install "$build" --prefix "$tree" --strip --component "$component" >/dev/null
done

# ---- bundle the non-glibc libraries -------------------------------------------
source "$(dirname "${BASH_SOURCE[0]}")/lib/bundle.sh"
bundle_shared_libraries "$tree"

# ---- check it runs from elsewhere, with nothing from the environment ----------
check_dir=$(mktemp -d)
trap 'rm -rf "$check_dir"' EXIT
(cd "$check_dir" && env -i "$tree/bin/ferrox" --version) >/dev/null
json=$(cd "$check_dir" && env -i "$tree/bin/ferrox" --config "$tree/etc/ferrox/ferrox.yaml" backends --json 2>/dev/null) || true
python3 - "$json" "$tree" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
cpu = [b for b in doc["backends"] if b["name"] == "cpu"]
assert cpu and cpu[0]["state"] == "ready", f"cpu backend not ready: {cpu}"
assert cpu[0]["path"].startswith(sys.argv[2] + "/lib/ferrox/plugins/"), cpu[0]["path"]
PY
# Every library loaded must be ours or glibc's: nothing from /usr/lib leaks in.
leaks=$(cd "$check_dir" && env -i LD_DEBUG=libs "$tree/bin/ferrox" --config "$tree/etc/ferrox/ferrox.yaml" backends 2>&1 >/dev/null |
    sed -n 's/.*calling init: //p' | sort -u | while read -r lib; do
        [[ $lib == "$tree"/* ]] && continue
        # Plugins are dlopened by descriptor (core/src/plugin/trusted_open.cpp); the
        # JSON check above says the cpu one is the tree's.
        [[ $lib == /proc/self/fd/* ]] && continue
        is_glibc "$(basename "$lib")" || echo "$lib"
    done)
[[ -z $leaks ]] || { echo "make-tarball: loaded from outside the tarball: $leaks" >&2; exit 1; }

tarball="$out/$name.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$stage" -czf "$tarball" "$name"
size=$(stat -c %s "$tarball")
((size < max_bytes)) || { echo "make-tarball: $tarball is $size bytes, over 64 MiB" >&2; exit 1; }
echo "make-tarball: $(find "$tree" -type f | wc -l) files, bundled: $(cd "$tree/lib" && ls -- *.so.* | grep -v ferrox | tr '\n' ' ')" >&2
echo "$tarball"
