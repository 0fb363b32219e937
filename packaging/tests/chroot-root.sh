#!/usr/bin/env bash
# Shared helpers for the chroot install test: a cached Debian 12 (bookworm)
# minbase root with the tools the example-plugin build needs, and mounts.
# Sourced by packaging/test-install-chroot.sh; not run on its own.
set -euo pipefail

FERROX_CACHE_DIR=${FERROX_CACHE_DIR:-$HOME/.cache/ferrox}
FERROX_DEBIAN_MIRROR=${FERROX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# g++/make/cmake are part of the cached root so that a rerun downloads nothing
# for them and the purge check's "before" snapshot already includes them. The
# container image (packaging/oci) sets its own tools and tarball.
FERROX_ROOT_TOOLS=${FERROX_ROOT_TOOLS:-g++,make,cmake,pkgconf}
FERROX_ROOT_TARBALL=${FERROX_ROOT_TARBALL:-$FERROX_CACHE_DIR/bookworm-minbase-tools.tar.gz}
FERROX_APT_ARCHIVES="$FERROX_CACHE_DIR/apt-archives"

# root_prepare <dir>: a fresh root in <dir>, unpacked from the cache or, the
# first time, made with debootstrap and then cached.
root_prepare() {
    local root=$1
    mkdir -p "$root" "$FERROX_CACHE_DIR" "$FERROX_APT_ARCHIVES/partial"
    if [[ -f $FERROX_ROOT_TARBALL ]]; then
        tar -C "$root" -xzf "$FERROX_ROOT_TARBALL"
        return
    fi
    debootstrap --variant=minbase --include="$FERROX_ROOT_TOOLS" \
        --cache-dir="$FERROX_APT_ARCHIVES" bookworm "$root" "$FERROX_DEBIAN_MIRROR"
    cat >"$root/etc/apt/sources.list" <<SOURCES
deb $FERROX_DEBIAN_MIRROR bookworm main
deb $FERROX_DEBIAN_MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
    # Keep downloaded .debs: the archive folder is the shared cache.
    echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$root/etc/apt/apt.conf.d/01keep"
    echo 'APT::Sandbox::User "root";' >"$root/etc/apt/apt.conf.d/01root"
    rm -rf "$root"/var/cache/apt/archives/*.deb
    tar -C "$root" -czf "$FERROX_ROOT_TARBALL.tmp" . && mv "$FERROX_ROOT_TARBALL.tmp" "$FERROX_ROOT_TARBALL"
}

# root_mount <dir> / root_umount <dir>: /proc, /dev and the shared apt cache.
root_mount() {
    local root=$1
    mount -t proc proc "$root/proc"
    mount --bind /dev "$root/dev"
    mount --bind "$FERROX_APT_ARCHIVES" "$root/var/cache/apt/archives"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
}
root_umount() {
    local root=$1 m
    for m in var/cache/apt/archives dev proc; do
        mountpoint -q "$root/$m" && umount "$root/$m" || true
    done
}

# in_root <dir> <command...>: run in the root with a clean environment.
in_root() {
    local root=$1
    shift
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive chroot "$root" "$@"
}

# opens_in_root <log> <dir> <command...>: in_root under the host's strace, which
# logs every open the command attempts. ferrox dlopens plugins through
# /proc/self/fd/N (see core/src/plugin/trusted_open.cpp), so LD_DEBUG would only
# show those names; the open of the plugin file itself names it.
opens_in_root() {
    local log=$1 root=$2
    shift 2
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        strace -f -qq -e trace=open,openat,openat2 -o "$log" chroot "$root" "$@"
}
