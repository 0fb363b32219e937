#!/usr/bin/env bash
# Slow install test: installs the .debs into a real Debian 12 (bookworm)
# minbase root with dpkg/apt and checks what an operator would see:
#   ferrox alone -> cpu ready, libcuda and libferrox_cuda never touched, the
#   server unit installed and not enabled;
#   + ferrox-cuda, [cuda, cpu] -> cuda in the typed no-driver state, exit 0;
#   upgrade 0.1.0 -> 0.1.1 keeps an edited /etc/ferrox/ferrox.yaml;
#   removing ferrox-cuda -> CPU only again;
#   libferrox-dev builds examples/plugin-template, which ferrox loads (ready);
#   libferrox-dev builds examples/batched (the C API), which runs;
#   purging everything leaves no file behind.
#
#   sudo packaging/test-install-chroot.sh [WORK_DIR]   (default build/chroot-test)
#
# Needs root, debootstrap and network access to the Debian mirror the first
# time; the root is cached in ~/.cache/ferrox (FERROX_CACHE_DIR). Builds
# 0.1.0 and 0.1.1 packages with packaging/build-debs.sh unless
# FERROX_DEBS_OLD / FERROX_DEBS_NEW name folders that already hold them.
set -euo pipefail
root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root_dir/packaging/tests/chroot-root.sh"
work=${1:-$root_dir/build/chroot-test}
old_version=0.1.0 new_version=0.1.1 release=1
jail="$work/root"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }
expect_eq() { if [[ $2 == "$3" ]]; then pass "$1"; else fail "$1: got '$2', expected '$3'"; fi; }
t0=$SECONDS t_step=$SECONDS current=""
timings=()
step() {
    [[ -n $current ]] && timings+=("$(printf '%5d s  %s' $((SECONDS - t_step)) "$current")")
    current=$1 t_step=$SECONDS
    echo "== $1"
}
cleanup() { root_umount "$jail" 2>/dev/null || true; }
trap cleanup EXIT

# ---- packages ---------------------------------------------------------------
step "build 0.1.0 and 0.1.1 packages"
old_debs=${FERROX_DEBS_OLD:-}
new_debs=${FERROX_DEBS_NEW:-}
if [[ -z $old_debs ]]; then
    FERROX_CUDA_ARCHS=${FERROX_CUDA_ARCHS:-80} "$root_dir/packaging/build-debs.sh" "$work/build-$old_version" >/dev/null
    old_debs="$work/build-$old_version/packages"
fi
if [[ -z $new_debs ]]; then
    FERROX_CUDA_ARCHS=${FERROX_CUDA_ARCHS:-80} "$root_dir/packaging/build-debs.sh" "$work/build-$new_version" "$new_version" >/dev/null
    new_debs="$work/build-$new_version/packages"
fi

step "prepare the bookworm root (cached: $FERROX_ROOT_TARBALL)"
cleanup
rm -rf "$jail"
root_prepare "$jail"
root_mount "$jail"
mkdir -p "$jail/tmp/debs"
cp "$old_debs"/*.deb "$new_debs"/*.deb "$jail/tmp/debs/"
in_root "$jail" apt-get update -qq

# snapshot: every path outside the volatile folders, for the purge check.
snapshot() {
    (cd "$jail" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./tmp -o -path ./var/cache \
        -o -path ./var/lib/apt -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./root \) -prune -o -print) | sort
}
snapshot >"$work/files-before"
apt_install() { in_root "$jail" apt-get install -y -q --no-install-recommends "$@" >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; return 1; }; }
deb() { echo "/tmp/debs/${1}_${2}-${release}_amd64.deb"; }
ferrox() { in_root "$jail" ferrox "$@"; }
# state <json> <backend>: the backend's state in `ferrox backends --json`.
state() { python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(" ".join(b["state"] for b in d["backends"] if b["name"]==sys.argv[2]) or "absent")' "$1" "$2"; }

# ---- ferrox alone --------------------------------------------------------------
step "install ferrox $old_version (dependencies from the mirror)"
apt_install "$(deb ferrox $old_version)"
expect_eq "ferrox --version" "$(ferrox --version)" "ferrox $old_version"
# The server unit is installed but nothing enables it (test-debs.sh verifies its content).
[[ -f $jail/lib/systemd/system/ferrox-server.service ]] && pass "ferrox-server.service installed" ||
    fail "no /lib/systemd/system/ferrox-server.service"
[[ -z $(find "$jail/etc/systemd" -name 'ferrox*' 2>/dev/null) ]] && pass "ferrox-server.service not enabled" ||
    fail "ferrox-server.service enabled: $(find "$jail/etc/systemd" -name 'ferrox*')"

step "CPU only: backends, and no CUDA file is ever opened (strace)"
json=$(ferrox backends --json 2>/dev/null) && pass "ferrox backends exit 0" || fail "ferrox backends exit $?"
expect_eq "cpu state" "$(state "$json" cpu)" "ready"
ferrox backends >/dev/null 2>&1 && pass "ferrox backends (table) exit 0" || fail "ferrox backends (table) failed"
opens_in_root "$work/opens.log" "$jail" ferrox backends >/dev/null 2>&1 || fail "ferrox backends under strace failed"
grep -E 'libcuda|libferrox_cuda' "$work/opens.log" && fail "CUDA files were opened (above)" ||
    pass "strace: no open of libcuda or libferrox_cuda"
# A successful open of the plugin file, then the dlopen of its descriptor.
grep -E '"libferrox_cpu\.so".* = [0-9]+$' "$work/opens.log" >/dev/null && pass "strace: libferrox_cpu.so opened" ||
    fail "libferrox_cpu.so not opened: $(grep -c . "$work/opens.log") opens logged"
grep -E '"/proc/self/fd/+[0-9]+".* = [0-9]+$' "$work/opens.log" >/dev/null && pass "strace: a plugin descriptor was dlopened" ||
    fail "no /proc/self/fd/N open: the plugin was not loaded by descriptor"

# ---- ferrox-cuda ----------------------------------------------------------------
step "install ferrox-cuda $old_version; not selected -> never opened"
apt_install "$(deb ferrox-cuda $old_version)"
json=$(ferrox backends --json 2>/dev/null) || fail "ferrox backends exit $? with ferrox-cuda installed"
expect_eq "cuda state with order [cpu]" "$(state "$json" cuda)" "not-selected"
opens_in_root "$work/opens.log" "$jail" ferrox backends >/dev/null 2>&1 || fail "ferrox backends under strace failed"
grep -E 'libcuda|libferrox_cuda' "$work/opens.log" && fail "unselected cuda plugin was opened (above)" ||
    pass "strace: unselected libferrox_cuda never opened"

step "select [cuda, cpu] in /etc/ferrox/ferrox.yaml: no driver is a typed state"
sed -i 's/^  order: \[cpu\]$/  order: [cuda, cpu]   # edited by the install test/' "$jail/etc/ferrox/ferrox.yaml"
grep -q 'order: \[cuda, cpu\]' "$jail/etc/ferrox/ferrox.yaml" || fail "could not edit the conffile"
set +e
json=$(ferrox backends --json 2>"$work/stderr.log"); rc=$?
set -e
expect_eq "ferrox backends exit status, cuda without driver" "$rc" "0"
expect_eq "cuda state" "$(state "$json" cuda)" "no-driver"
expect_eq "cpu state" "$(state "$json" cpu)" "ready"
ferrox backends >"$work/table.log" 2>&1 && pass "table output exit 0" || fail "table output failed"
sed 's/^/  | /' "$work/table.log" | head -8

# ---- upgrade ---------------------------------------------------------------------
step "upgrade ferrox and ferrox-cuda to $new_version: the edited conffile is kept"
apt_install "$(deb ferrox $new_version)" "$(deb ferrox-cuda $new_version)"
expect_eq "ferrox --version after upgrade" "$(ferrox --version)" "ferrox $new_version"
expect_eq "dpkg version" "$(in_root "$jail" dpkg-query -W -f '${Version}' ferrox)" "$new_version-$release"
grep -q 'order: \[cuda, cpu\]   # edited by the install test' "$jail/etc/ferrox/ferrox.yaml" &&
    pass "edited /etc/ferrox/ferrox.yaml survived the upgrade" || fail "conffile edit lost on upgrade"
leftovers=$(ls "$jail/etc/ferrox/" | grep -v '^ferrox.yaml$' || true)
expect_eq "extra files in /etc/ferrox" "$leftovers" ""
json=$(ferrox backends --json 2>/dev/null) || fail "backends after upgrade"
expect_eq "cuda state after upgrade" "$(state "$json" cuda)" "no-driver"

step "remove ferrox-cuda: CPU only again"
in_root "$jail" apt-get remove -y -q ferrox-cuda >"$work/apt.log" 2>&1 || cat "$work/apt.log"
[[ -e $jail/usr/lib/x86_64-linux-gnu/ferrox/plugins/libferrox_cuda.so ]] && fail "libferrox_cuda.so still there" ||
    pass "libferrox_cuda.so removed"
[[ -e $jail/lib/systemd/system/ferrox-server.service.d/cuda.conf ]] && fail "the unit's cuda.conf drop-in still there" ||
    pass "the unit's cuda.conf drop-in removed"
json=$(ferrox backends --json 2>/dev/null) && pass "backends exit 0 without ferrox-cuda" || fail "backends exit $?"
expect_eq "cuda state after removal" "$(state "$json" cuda)" "not-found"
expect_eq "cpu state after removal" "$(state "$json" cpu)" "ready"

# ---- libferrox-dev + third-party plugin -------------------------------------------
step "libferrox-dev: build examples/plugin-template in the root, ferrox loads it"
apt_install "$(deb libferrox-dev $new_version)"
rm -rf "$jail/tmp/plugin-template"
cp -r "$root_dir/examples/plugin-template" "$jail/tmp/plugin-template"
if in_root "$jail" sh -c 'cd /tmp/plugin-template && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build' >"$work/example.log" 2>&1; then
    pass "example plugin builds against the installed libferrox-dev"
else
    fail "example plugin build failed"; cat "$work/example.log"
fi
printf 'backends:\n  order: [template, cpu]\n' >"$jail/tmp/plugin-template/template.yaml"
json=$(ferrox --config /tmp/plugin-template/template.yaml --plugin-dir /tmp/plugin-template/build backends --json 2>/dev/null) ||
    fail "backends with the template plugin exit $?"
expect_eq "template state" "$(state "$json" template)" "ready"
pc_libs=$(in_root "$jail" pkg-config --libs ferrox)
[[ " $pc_libs " == *" -lferrox_core "*"-lspdlog "* ]] && pass "pkg-config --libs ferrox: $pc_libs" ||
    fail "pkg-config --libs ferrox: $pc_libs"

step "libferrox-dev: build examples/batched (ferrox.h, 4 prompts at once) in the root"
rm -rf "$jail/tmp/batched"
cp -r "$root_dir/examples/batched" "$jail/tmp/batched"
if in_root "$jail" sh -c 'cd /tmp/batched && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build' >"$work/batched.log" 2>&1; then
    pass "the C API example builds against the installed libferrox-dev"
else
    fail "the C API example build failed"; cat "$work/batched.log"
fi
# No model in the root: it must run, link against the installed library and print its usage.
rc=0
in_root "$jail" /tmp/batched/build/ferrox-batched >"$work/batched-run.log" 2>&1 || rc=$?
expect_eq "ferrox-batched without a model exits" "$rc" "2"
grep -q '^usage: ' "$work/batched-run.log" && pass "ferrox-batched prints its usage" ||
    fail "ferrox-batched: $(head -3 "$work/batched-run.log")"
rm -rf "$jail/tmp/batched"

# ---- purge -------------------------------------------------------------------------
step "purge everything: no file left behind"
in_root "$jail" apt-get purge -y -q libferrox-dev ferrox >"$work/apt.log" 2>&1 || cat "$work/apt.log"
in_root "$jail" apt-get autoremove --purge -y -q >>"$work/apt.log" 2>&1 || cat "$work/apt.log"
rm -rf "$jail/tmp/plugin-template"
snapshot >"$work/files-after"
left=$(diff "$work/files-before" "$work/files-after" || true)
expect_eq "file list before install vs after purge" "$left" ""
expect_eq "ferrox packages known to dpkg" "$(in_root "$jail" dpkg -l | awk '$2 ~ /ferrox/' )" ""

step "end"
cleanup
echo "== timings"
printf '%s\n' "${timings[@]}"
echo "total $((SECONDS - t0)) s; $failures failure(s)"
((failures == 0))
