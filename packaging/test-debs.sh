#!/usr/bin/env bash
# Fast install test (CI): builds the three .debs and checks their contents,
# control fields and lintian verdict without installing anything.
#
#   packaging/test-debs.sh [BUILD_DIR]     (default build/deb-test)
#
# Reuses BUILD_DIR's packages when FERROX_REUSE_DEBS=1. Needs dpkg-dev (for
# dpkg-shlibdeps) and lintian. FERROX_CUDA_ARCHS defaults to 80 here.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build/deb-test}
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }
expect_eq() { # <what> <actual> <expected>
    if [[ $2 == "$3" ]]; then pass "$1"; else fail "$1: got '$2', expected '$3'"; fi
}
step_start=$SECONDS
step() { echo "== $* (t=$((SECONDS - step_start)) s)"; }

step "build debs"
if [[ ${FERROX_REUSE_DEBS:-0} != 1 ]]; then
    FERROX_CUDA_ARCHS=${FERROX_CUDA_ARCHS:-80} "$root/packaging/build-debs.sh" "$build" >/dev/null
fi
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
release=$(sed -n 's/^FERROX_PACKAGE_RELEASE:[A-Z]*=//p' "$build/CMakeCache.txt")
debver="$version-$release"
pkgdir="$build/packages"
deb() { echo "$pkgdir/${1}_${debver}_amd64.deb"; }
for p in ferrox ferrox-cuda libferrox-dev; do
    [[ -f $(deb $p) ]] && pass "built $(basename "$(deb $p)") ($(stat -c %s "$(deb $p)") bytes)" ||
        fail "missing $(deb $p)"
done
((failures == 0)) || exit 1

# files <pkg>: the package's paths, directories left out, "./" stripped.
files() { dpkg-deb -c "$(deb "$1")" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./|/|' | sort; }
has() { grep -qxF "$2" <<<"$1" && pass "$3 has $2" || fail "$3 lacks $2"; }
lacks() { grep -qE "$2" <<<"$1" && fail "$3 must not have $2" || pass "$3 has no $2"; }
field() { dpkg-deb -f "$(deb "$1")" "$2"; }
multiarch=/usr/lib/x86_64-linux-gnu
plugins=$multiarch/ferrox/plugins
unit=/lib/systemd/system/ferrox-server.service
cuda_dropin=/lib/systemd/system/ferrox-server.service.d/cuda.conf

step "ferrox contents and control"
f=$(files ferrox)
for path in /usr/bin/ferrox $multiarch/libferrox_core.so.${version%%.*} \
    $multiarch/libferrox_core.so.$version $plugins/libferrox_cpu.so /etc/ferrox/ferrox.yaml \
    /usr/share/man/man1/ferrox.1.gz /usr/share/doc/ferrox/copyright \
    /usr/share/doc/ferrox/changelog.Debian.gz $unit; do has "$f" "$path" ferrox; done
lacks "$f" 'libferrox_cuda|/include/|libferrox_core\.so$|/cmake/|\.pc$' ferrox
expect_eq "ferrox conffiles" "$(dpkg-deb --info "$(deb ferrox)" conffiles)" "/etc/ferrox/ferrox.yaml"
expect_eq "ferrox Version" "$(field ferrox Version)" "$debver"
expect_eq "ferrox Suggests" "$(field ferrox Suggests)" "ferrox-cuda"
depends=$(field ferrox Depends)
for lib in libc6 libstdc++6 libyaml-cpp0.7 libspdlog1.10-fmt9 libfmt9 libcurl4 libssl3; do
    tr ',' '\n' <<<"$depends" | sed 's/^ *//; s/ .*//' | grep -qxF "$lib" && pass "ferrox Depends has $lib" ||
        fail "ferrox Depends lacks $lib: $depends"
done
grep -q cuda <<<"$depends" && fail "ferrox Depends mentions cuda: $depends" || pass "ferrox Depends has no cuda"
dpkg-deb --info "$(deb ferrox)" shlibs | grep -qx "libferrox_core $((${version%%.*})) ferrox (= $debver)" &&
    pass "ferrox shlibs" || fail "ferrox shlibs: $(dpkg-deb --info "$(deb ferrox)" shlibs)"
dpkg-deb --info "$(deb ferrox)" triggers | grep -q ldconfig && pass "ferrox ldconfig trigger" ||
    fail "ferrox has no ldconfig trigger"

step "ferrox-cuda contents and control"
c=$(files ferrox-cuda)
expect_eq "ferrox-cuda files" "$(grep -v '^/usr/share/doc/ferrox-cuda/' <<<"$c")" "$cuda_dropin
$plugins/libferrox_cuda.so"
shared=$(comm -12 <(echo "$f") <(echo "$c"))
expect_eq "files shared by ferrox and ferrox-cuda" "$shared" ""
expect_eq "ferrox-cuda Recommends" "$(field ferrox-cuda Recommends)" "libcuda1 (>= 580) | libcuda.so.1"
cuda_depends=$(field ferrox-cuda Depends)
grep -qF "ferrox (= $debver)" <<<"$cuda_depends" && pass "ferrox-cuda Depends has ferrox (= $debver)" ||
    fail "ferrox-cuda Depends: $cuda_depends"
# Besides ferrox, only what dpkg-shlibdeps finds: glibc and the GCC runtime.
others=$(tr ',' '\n' <<<"$cuda_depends" | sed 's/^ *//' | grep -vE '^(ferrox|libc6|libgcc-s1|libstdc\+\+6)( |$)' || true)
expect_eq "ferrox-cuda Depends beyond ferrox/glibc/gcc runtime" "$others" ""

step "libferrox-dev contents and control"
d=$(files libferrox-dev)
for path in /usr/include/ferrox/backend_abi.h /usr/include/ferrox/expected.h \
    $multiarch/libferrox_core.so $multiarch/pkgconfig/ferrox.pc \
    $multiarch/cmake/ferrox/ferroxConfig.cmake $multiarch/cmake/ferrox/ferroxConfigVersion.cmake \
    $multiarch/cmake/ferrox/ferroxTargets.cmake /usr/share/doc/libferrox-dev/copyright; do
    has "$d" "$path" libferrox-dev
done
expect_eq "libferrox-dev Depends" "$(field libferrox-dev Depends)" "ferrox (= $debver), libspdlog-dev, libfmt-dev, nlohmann-json3-dev"
all=$( (echo "$f"; echo "$c"; echo "$d") | sort | uniq -d)
expect_eq "files shared by any two packages" "$all" ""

step "ELF checks"
x=$(mktemp -d)
trap 'rm -rf "$x"' EXIT
dpkg-deb -x "$(deb ferrox)" "$x"
dpkg-deb -x "$(deb ferrox-cuda)" "$x"
for elf in "$x/usr/bin/ferrox" "$x$multiarch/libferrox_core.so.$version" "$x$plugins"/*.so; do
    name=${elf#"$x"}
    readelf -d "$elf" | grep -qE 'R(UN)?PATH' && fail "$name has an RPATH" || pass "$name has no RPATH"
    readelf -S "$elf" | grep -q '\.debug_info' && fail "$name is not stripped" || pass "$name is stripped"
done
readelf -d "$x$plugins/libferrox_cuda.so" | grep NEEDED | grep -qi cuda &&
    fail "libferrox_cuda.so links a CUDA library dynamically" || pass "libferrox_cuda.so NEEDS no CUDA library"

step "systemd unit: installed, not enabled, verified"
# Not enabled: nothing links it into a .wants folder and no maintainer script
# calls systemctl or deb-systemd-helper (CPack's scripts only run ldconfig).
lacks "$f"$'\n'"$c" '\.wants/|^/etc/systemd/' "ferrox/ferrox-cuda"
for p in ferrox ferrox-cuda; do
    scripts=$(for s in preinst postinst prerm postrm; do dpkg-deb --info "$(deb $p)" $s 2>/dev/null || true; done)
    grep -qE 'systemctl|deb-systemd|invoke-rc' <<<"$scripts" && fail "$p maintainer scripts touch systemd" ||
        pass "$p maintainer scripts do not enable or start the unit"
done
expect_eq "ExecStart" "$(grep '^ExecStart=' "$x$unit")" \
    "ExecStart=/usr/bin/ferrox --config /etc/ferrox/ferrox.yaml serve"
# systemd-analyze verify --root checks the unit as installed in the extracted
# packages: /usr/bin/ferrox must exist there, every key and value must parse,
# and the ferrox-cuda drop-in is merged in. The root also needs the targets a
# service depends on by default (sysinit.target, ...), taken from the host.
# Its exit status misses unknown keys and unparsable values (systemd 252 only
# warns, "ignoring"), so any output at all is a failure. --man=no: the man
# page check would run the host's man(1), which does not look inside the root
# (the page's presence is checked above).
if command -v systemd-analyze >/dev/null; then
    for target in /lib/systemd/system/*.target; do cp -L "$target" "$x/lib/systemd/system/"; done
    verify() { # <root>: the output of verify, "exit N" appended when nonzero
        systemd-analyze verify --man=no --root="$1" ferrox-server.service 2>&1 || echo "exit $?"
    }
    out=$(verify "$x")
    expect_eq "systemd-analyze verify ferrox-server.service (+ cuda.conf)" "$out" ""
    # The check must catch a broken unit: each fault below, alone, must make it fail.
    cp "$x$unit" "$x/unit.good"
    cp "$x$cuda_dropin" "$x/dropin.good"
    while IFS='|' read -r file what edit; do
        [[ $file == unit ]] && target=$unit || target=$cuda_dropin
        sed "$edit" "$x/$file.good" >"$x$target"
        cmp -s "$x$target" "$x/$file.good" && { fail "fault '$what' did not change the $file"; continue; }
        out=$(verify "$x")
        [[ -n $out ]] && pass "verify catches $what: $(head -1 <<<"$out" | sed "s|$x||")" ||
            fail "verify passed a unit with $what"
        cp "$x/$file.good" "$x$target"
    done <<'FAULTS'
unit|a misspelled key|s/^ProtectSystem=/ProtectSytem=/
unit|a bad value|s/^TimeoutStopSec=.*/TimeoutStopSec=forty/
unit|an unknown address family|s/^RestrictAddressFamilies=.*/RestrictAddressFamilies=AF_INET AF_BOGUS/
unit|a missing executable|s|^ExecStart=/usr/bin/ferrox |ExecStart=/usr/bin/ferrox-missing |
dropin|a bad value in cuda.conf|s/^PrivateDevices=no/PrivateDevices=maybe/
FAULTS
    # Exposure (0 = locked down, 10 = none), CPU unit alone and with cuda.conf.
    # The threshold is out of 100: 25 = 2.5, a little above what the unit scores.
    mv "$x$cuda_dropin" "$x/dropin.aside"
    for variant in cpu cuda; do
        [[ $variant == cuda ]] && mv "$x/dropin.aside" "$x$cuda_dropin"
        out=$(systemd-analyze security --offline=yes --root="$x" --threshold=25 ferrox-server.service 2>&1) &&
            pass "exposure ($variant): $(grep -o 'Overall exposure level.*' <<<"$out")" ||
            fail "exposure ($variant) above 2.5: $(grep -o 'Overall exposure level.*' <<<"$out")"
    done
else
    fail "systemd-analyze not found (Debian package systemd)"
fi

step "sandbox: the packaged ferrox under the unit's system-call filter and W^X (strace)"
# The unit cannot be started here (no systemd as PID 1), so check from what the
# packaged binary does: packaging/tests/sandbox-syscalls.py runs it under strace
# and fails on a system call outside @system-service (SystemCallFilter=) or a
# writable+executable mapping (MemoryDenyWriteExecute=yes). Then it must catch
# both kinds of fault, injected.
if command -v strace >/dev/null && command -v systemd-analyze >/dev/null; then
    tiny=${FERROX_TINY_MODELS:-$HOME/.cache/ferrox/tiny-models}/tiny-llama.gguf
    [[ -f $tiny ]] || python3 "$root/tests/model/make_tiny_models.py" >/dev/null
    sandbox="$root/packaging/tests/sandbox-syscalls.py"
    fx=(env LD_LIBRARY_PATH="$x$multiarch" "$x/usr/bin/ferrox" --config "$x/etc/ferrox/ferrox.yaml"
        --plugin-dir "$x$plugins")
    out=$("$sandbox" -- "${fx[@]}" run -m "$tiny" -p "hello" -n 4 -t 2 2>&1) && pass "ferrox run: $out" ||
        fail "ferrox run would be stopped by the unit's sandbox: $out"
    # Exit status 1 is a violation found (2 would be the command failing).
    rc=0; "$sandbox" --filter @basic-io -- "${fx[@]}" run -m "$tiny" -p "hello" -n 4 -t 2 >/dev/null 2>&1 || rc=$?
    expect_eq "sandbox check on calls outside a narrower filter (@basic-io): exit" "$rc" "1"
    rc=0; "$sandbox" -- python3 -c 'import mmap; mmap.mmap(-1, 4096, prot=7)' >/dev/null 2>&1 || rc=$?
    expect_eq "sandbox check on a writable+executable mapping: exit" "$rc" "1"
else
    fail "strace or systemd-analyze not found"
fi

step "lintian"
lintian_out=$(lintian --fail-on none --display-info "$(deb ferrox)" "$(deb ferrox-cuda)" "$(deb libferrox-dev)" 2>&1 || true)
echo "$lintian_out" | sed 's/^/  lintian: /'
errors=$(grep -c '^E:' <<<"$lintian_out" || true)
expect_eq "lintian errors" "$errors" "0"

step "done"
echo "test-debs: $failures failure(s)"
((failures == 0))
