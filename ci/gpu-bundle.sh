#!/usr/bin/env bash
# Build the self-contained folder a GPU session carries to the lent machine:
#
#   bash ci/gpu-bundle.sh [BUNDLE_DIR]        (default build/gpu-bundle)
#
# The tarball layout of packaging/make-tarball.sh (bin/ lib/ lib/ferrox/plugins/
# etc/ferrox/), Release, CUDA SASS for sm_90 only (H200), plus the GPU test
# executables and the copy-bandwidth tool in bin/. Every binary has the RPATH
# $ORIGIN/../lib (DT_RPATH, so it also serves the bundled libraries' own
# needs), and every non-glibc library is copied into lib/, so the folder runs
# with no Debian packages and no build tree. ci/gpu-check.sh runs it.
#
# Environment: BUILD (default build/gpu-bundle-build), JOBS (default 2),
# FERROX_CUDA_ARCHS (default 90), FERROX_GPU_BUNDLE_MODEL (a GGUF file to put in
# models/ for the decode step; it counts towards the 64 MiB).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=$(realpath -m "${1:-$root/build/gpu-bundle}")
build=$(realpath -m "${BUILD:-$root/build/gpu-bundle-build}")
archs=${FERROX_CUDA_ARCHS:-90}
max_bytes=$((64 * 1024 * 1024))  # what the device tool carries
say() { echo "gpu-bundle: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

# Same prefix/libdir/RPATH choices as make-tarball.sh. BUILD_WITH_INSTALL_RPATH
# gives the test executables (which are never installed) $ORIGIN/../lib in the
# build tree already; the build tree mirrors bin/ lib/, so it still runs there.
# shellcheck disable=SC2054  # the commas are the linker's (-Wl,...)
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFERROX_WERROR=ON -DFERROX_BUILD_TESTS=ON
      -DFERROX_CUDA=ON -DFERROX_CUDA_ARCHS="$archs"
      -DCMAKE_INSTALL_PREFIX=/usr/local -DCMAKE_INSTALL_LIBDIR=lib
      -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON
      -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags
      -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags)
if command -v ccache >/dev/null; then
    args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
           -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
mkdir -p "$(dirname "$build")"
cmake -S "$root" -B "$build" "${args[@]}" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; die "configure"; }
tests=(test_cuda_gpu test_cuda_batches test_cuda_plugin test_cuda_capacity ferrox_cuda_bandwidth ferrox_cuda_bench)
cmake --build "$build" -j "${JOBS:-2}" --target ferrox ferrox_cpu ferrox_cuda \
    ferrox_packaging_files ferrox_synth_gguf "${tests[@]}"

# ---- the tarball tree ---------------------------------------------------------
rm -rf "$bundle"
for component in ferrox cuda; do
    cmake --install "$build" --prefix "$bundle" --strip --component "$component" >/dev/null
done
rm -rf "$bundle/share"  # man page and docs: not needed on the GPU machine
for exe in "${tests[@]}"; do
    install -m 0755 "$build/bin/$exe" "$bundle/bin/$exe"
    strip --strip-unneeded "$bundle/bin/$exe"
done
# Neither GPU test reads tests/data (they draw random weights), so no test data.
# Models for the whole-model steps (ci/gpu_model_parity.py, test_cuda_batches).
# Tiny test models, carried whole where small: llama (SwiGLU, Q4_K/Q6_K mix)
# and gemma2 (soft-capped attention and logits, alternating window). Those
# whose vocabulary makes them large travel as headers (metadata, tokenizer,
# tensor table; bench/synth_gguf strip), and gpu-check.sh fills in random
# valid blocks of the same kinds there: gpt-oss (attention sinks, MXFP4
# experts, clamped SwiGLU, biases) and qwen3moe (experts). Gemma 3 270M
# (~240 MB) and a Qwen2-7B-shaped Q4_K_M file (4.7 GB, bench/shaped_header.py)
# travel as headers too, for the speed steps.
install -m 0755 "$root/ci/gpu_model_parity.py" "$bundle/bin/gpu_model_parity.py"
tiny=${FERROX_TINY_MODELS:-$HOME/.cache/ferrox/tiny-models}
[[ -x $build/bin/ferrox_synth_gguf ]] || die "no $build/bin/ferrox_synth_gguf"
install -m 0755 "$build/bin/ferrox_synth_gguf" "$bundle/bin/ferrox_synth_gguf"
strip --strip-unneeded "$bundle/bin/ferrox_synth_gguf"
mkdir -p "$bundle/models/tiny"
for arch in llama gemma2 gpt-oss qwen3moe; do
    if [[ ! -f $tiny/tiny-$arch.gguf ]]; then
        say "no $tiny/tiny-$arch.gguf (python3 tests/model/make_tiny_models.py): not bundled"
    elif [[ $arch == llama || $arch == gemma2 ]]; then
        cp "$tiny/tiny-$arch.gguf" "$bundle/models/tiny/"
    else
        "$build/bin/ferrox_synth_gguf" strip "$tiny/tiny-$arch.gguf" \
            "$bundle/models/tiny/tiny-$arch.header" >&2 || die "cannot strip tiny-$arch.gguf"
    fi
done
if ! python3 "$root/bench/shaped_header.py" qwen2-7b-q4_k_m "$bundle/models/qwen2-7b-q4_k_m.header" >&2; then
    say "bench/shaped_header.py failed (gguf package, vocab files): no 7B-shaped model"
    rm -f "$bundle/models/qwen2-7b-q4_k_m.header"
fi
gemma=${FERROX_GEMMA_MODEL:-$HOME/.cache/ferrox/models/gemma-3-270m-q4_k_m.gguf}
if [[ -f $gemma ]]; then
    "$build/bin/ferrox_synth_gguf" strip "$gemma" "$bundle/models/gemma-3-270m.header" >&2 ||
        die "cannot strip $gemma"
else
    say "no $gemma: the Gemma-shaped steps will be skipped"
fi
# Optional: any other GGUF model for the decode step (counts towards the 64 MiB).
if [[ -n ${FERROX_GPU_BUNDLE_MODEL:-} ]]; then
    mkdir -p "$bundle/models"
    cp "$FERROX_GPU_BUNDLE_MODEL" "$bundle/models/" || die "cannot copy $FERROX_GPU_BUNDLE_MODEL"
fi

source "$(dirname "${BASH_SOURCE[0]}")/../packaging/lib/bundle.sh"
bundle_shared_libraries "$bundle" || die "cannot make the bundle self-contained"

# The config ci/gpu-check.sh uses: cuda first and required, cpu behind it.
cat >"$bundle/etc/ferrox/gpu-check.yaml" <<'YAML'
# ci/gpu-check.sh: the CUDA backend must be ready; cpu takes what cuda lacks.
backends:
  order: [cuda, cpu]
cuda:
  device: 0
  vram_budget: 0
  required: true
cpu:
  required: true
log:
  level: warn
YAML
# The whole-model step compares [cuda] alone (resident, and --resident off)
# with [cpu] alone.
for only in cuda cpu; do
    cat >"$bundle/etc/ferrox/gpu-$only-only.yaml" <<YAML
# ci/gpu-check.sh, whole-model step: the $only backend alone.
backends:
  order: [$only]
$only:
  required: true
log:
  level: warn
YAML
done
{
    echo "ferrox GPU bundle"
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ), CUDA $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), FERROX_CUDA_ARCHS=$archs, Release"
} >"$bundle/BUNDLE.txt"

# ---- checks: only glibc from the system, runs with an empty environment --------
# ldd of each executable resolves its whole closure through its DT_RPATH.
# (The plugins and bundled libraries have no RPATH of their own, as in the
# tarball: they are loaded into these executables, whose DT_RPATH serves them;
# the LD_DEBUG check below covers what is dlopen'ed.)
leaked=0
for exe in "$bundle"/bin/*; do
    while read -r soname arrow path _; do
        [[ $arrow == "=>" ]] || continue
        [[ $path == "$bundle"/* ]] && continue
        is_glibc "$soname" || { say "$exe takes $soname from $path"; leaked=1; }
    done < <(env -i ldd "$exe")
done
((leaked == 0)) || die "libraries from outside the bundle (see above)"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
run_bare() { (cd "$scratch" && env -i FERROX_CUDA_PLUGIN="$bundle/lib/ferrox/plugins/libferrox_cuda.so" "$@"); }
run_bare "$bundle/bin/ferrox" --version >/dev/null || die "ferrox --version"
# required: false here, so a host without a GPU still lists both backends.
sed 's/^  required: true$/  required: false/' "$bundle/etc/ferrox/gpu-check.yaml" >"$scratch/probe.yaml"
json=$(run_bare "$bundle/bin/ferrox" --config "$scratch/probe.yaml" backends --json 2>/dev/null) ||
    die "ferrox backends"
states=$(python3 - "$json" "$bundle" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
found = {b["name"]: b for b in doc["backends"]}
for name in ("cuda", "cpu"):
    assert name in found, f"{name} not listed: {list(found)}"
    assert found[name]["path"].startswith(sys.argv[2] + "/lib/ferrox/plugins/"), found[name]["path"]
assert found["cpu"]["state"] == "ready", found["cpu"]
print(" ".join(f"{n}={found[n]['state']}" for n in ("cuda", "cpu")))
PY
) || die "backend states from the bundle"
say "ferrox backends from the bundle (env -i): $states"
run_bare "$bundle/bin/test_cuda_plugin" >"$scratch/plugin.log" 2>&1 ||
    { cat "$scratch/plugin.log"; die "test_cuda_plugin from the bundle"; }
# Every library a run loads (plugins dlopen'ed included) is the bundle's or
# glibc's, or the NVIDIA driver's own (libcuda and what it opens).
outside_libraries() {
    run_bare env LD_DEBUG=libs "$@" 2>&1 >/dev/null | sed -n 's/.*calling init: //p' | sort -u |
        while read -r lib; do
            [[ $lib == "$bundle"/* ]] && continue
            # A plugin is dlopen'ed through the descriptor the loader's trust
            # check opened (/proc/self/fd/N), so LD_DEBUG cannot name its file;
            # `ferrox backends` above checked each plugin's path is the bundle's.
            [[ $lib == /proc/self/fd/* ]] && continue
            is_glibc "$(basename "$lib")" && continue
            case $(basename "$lib") in libcuda.so* | libnvidia-*) continue ;; esac
            echo "$lib"
        done
}
leaks=$(outside_libraries "$bundle/bin/ferrox" --config "$scratch/probe.yaml" backends;
        outside_libraries "$bundle/bin/test_cuda_plugin")
[[ -z $leaks ]] || die "loaded from outside the bundle: $leaks"
say "ldd (env -i) and LD_DEBUG: nothing but glibc comes from the system"
run_bare "$bundle/bin/test_cuda_capacity" >"$scratch/capacity.log" 2>&1 ||
    { cat "$scratch/capacity.log"; die "test_cuda_capacity from the bundle"; }
set +e
run_bare "$bundle/bin/test_cuda_gpu" >"$scratch/gpu.log" 2>&1
gpu_rc=$?
set -e
case $gpu_rc in
    0) say "test_cuda_gpu passed (this machine has a GPU)" ;;
    77) say "test_cuda_gpu: $(head -1 "$scratch/gpu.log")" ;;
    *) cat "$scratch/gpu.log"; die "test_cuda_gpu exited $gpu_rc" ;;
esac
# Without a device the GPU tools must skip (77), not crash.
if ((gpu_rc == 77)); then
    expect_skip() {
        local rc=0
        run_bare "$@" >"$scratch/tool.log" 2>&1 || rc=$?
        ((rc == 77)) || { cat "$scratch/tool.log"; die "$* exited $rc, not 77, without a device"; }
        say "$(basename "$1") without a device: $(head -1 "$scratch/tool.log")"
    }
    expect_skip "$bundle/bin/ferrox_cuda_bandwidth"
    expect_skip "$bundle/bin/ferrox_cuda_bench" --kinds Q4_K --shape 8x256 --reps 1
fi

bytes=$(du -sb "$bundle" | cut -f1)
((bytes < max_bytes)) || die "$bundle is $bytes bytes, over the 64 MiB the device tool carries"
say "bundled: $(find "$bundle/lib" -maxdepth 1 -name '*.so*' -printf '%f ')"
say "$bundle: $(find "$bundle" -type f | wc -l) files, $bytes bytes ($(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of 64 MiB)"
echo "$bundle"
