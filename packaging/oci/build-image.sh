#!/usr/bin/env bash
# Builds ferrox's container image from the project's own .debs with buildah:
# a Debian 12 (bookworm) minbase root made by debootstrap (cached), the ferrox
# package -- and ferrox-cuda with --cuda -- installed by apt as any host would,
# an unprivileged user, and `ferrox serve` as the entrypoint. The result is an
# OCI archive that podman, docker (`docker load`), skopeo and containerd read.
#
#   sudo packaging/oci/build-image.sh [--cuda] DEBS_DIR OUT.tar [WORK_DIR]
#
# Needs root, debootstrap, buildah and the Debian mirror the first time (the
# root is cached in ~/.cache/ferrox). docs/operations.md ("Container images")
# says how to run it; packaging/oci/test-image.sh checks what it built.
set -euo pipefail
root_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

cuda=0
if [[ ${1:-} == --cuda ]]; then
    cuda=1
    shift
fi
if [[ $# -lt 2 ]]; then
    echo "usage: $0 [--cuda] DEBS_DIR OUT.tar [WORK_DIR]" >&2
    exit 2
fi
debs=$(cd "$1" && pwd)
out=$(realpath -m "$2")
work=$(realpath -m "${3:-$root_dir/build/oci}")

# The image's root: minbase plus the CA certificates `ferrox pull` needs for
# https; no compiler, no shell tools beyond minbase.
FERROX_ROOT_TOOLS=ca-certificates
FERROX_ROOT_TARBALL=${FERROX_CACHE_DIR:-$HOME/.cache/ferrox}/bookworm-minbase-image.tar.gz
source "$root_dir/packaging/tests/chroot-root.sh"

# One source for the user the image runs as (test-image.sh reads it back from
# the image's config, never from here).
image_uid=10001
tag=cpu
packages=("$debs"/ferrox_*.deb)
if ((cuda)); then
    tag=cuda
    packages+=("$debs"/ferrox-cuda_*.deb)
fi
for deb in "${packages[@]}"; do
    [[ -f $deb ]] || {
        echo "$0: no package $deb in $debs (packaging/build-debs.sh makes them)" >&2
        exit 2
    }
done
version=$(dpkg-deb -f "${packages[0]}" Version)

jail="$work/root-$tag"
cleanup() { root_umount "$jail" 2>/dev/null || true; }
trap cleanup EXIT
cleanup
rm -rf "$jail"
echo "== root (cached: $FERROX_ROOT_TARBALL)"
root_prepare "$jail"
root_mount "$jail"
mkdir -p "$jail/tmp/debs"
cp "${packages[@]}" "$jail/tmp/debs/"

echo "== install ${packages[*]##*/}"
in_root "$jail" apt-get update -qq
in_root "$jail" sh -c 'apt-get install -y -qq --no-install-recommends /tmp/debs/*.deb >/dev/null'
# The account the server runs as: no login, no password, its home the one
# writable place (the model store, FERROX_MODELS). Models mounted at /models
# stay owned by root, as the trust rules want (docs/security.md).
in_root "$jail" useradd --uid "$image_uid" --user-group --home-dir /var/lib/ferrox \
    --create-home --shell /usr/sbin/nologin ferrox
in_root "$jail" install -d -o root -g root -m 0755 /models
in_root "$jail" install -d -o ferrox -g ferrox -m 0700 /var/lib/ferrox/models
in_root "$jail" apt-get clean
root_umount "$jail"
# What only the build needed: the packages, apt's lists, the build host's
# resolver and the chroot helpers' apt settings.
rm -rf "$jail/tmp/debs" "$jail"/var/lib/apt/lists/* "$jail"/var/log/apt/* "$jail/var/log/dpkg.log" \
    "$jail/etc/apt/apt.conf.d/01keep" "$jail/etc/apt/apt.conf.d/01root"
: >"$jail/etc/resolv.conf"
# The runtime gives a container its own /dev; no node ships in the image. No
# setuid or setgid program either (su, passwd, ...): nothing in the image may
# gain privileges, as NoNewPrivileges= and RestrictSUIDSGID= in the systemd unit.
find "$jail/dev" -mindepth 1 -delete
find "$jail" -xdev -type f -perm /6000 -exec chmod ug-s {} +

echo "== image (buildah, OCI format)"
buildah=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
rm -rf "$work/storage" "$work/run"  # a store of its own, fresh each build
ctr=$("${buildah[@]}" from --quiet scratch)
trap '"${buildah[@]}" rm "$ctr" >/dev/null 2>&1 || true; cleanup' EXIT
mnt=$("${buildah[@]}" mount "$ctr")
tar -C "$jail" --numeric-owner -cf - . | tar -C "$mnt" --numeric-owner -xpf -
"${buildah[@]}" umount "$ctr" >/dev/null
env_args=(--env HOME=/var/lib/ferrox --env FERROX_MODELS=/var/lib/ferrox/models)
if ((cuda)); then
    # What the NVIDIA container toolkit reads to mount the driver and devices.
    env_args+=(--env NVIDIA_VISIBLE_DEVICES=all --env NVIDIA_DRIVER_CAPABILITIES=compute,utility)
fi
# Binding 0.0.0.0 makes the server refuse to start without API keys
# (FERROX_API_KEY or --api-key-file): the image never serves an open port.
"${buildah[@]}" config \
    --user "$image_uid:$image_uid" \
    --workingdir /var/lib/ferrox \
    "${env_args[@]}" \
    --port 8080/tcp \
    --stop-signal SIGTERM \
    --entrypoint '["/usr/bin/ferrox"]' \
    --cmd '["serve", "--host", "0.0.0.0", "--port", "8080", "--model", "/models/model.gguf"]' \
    --label org.opencontainers.image.title=ferrox \
    --label "org.opencontainers.image.version=$version" \
    --label org.opencontainers.image.description="ferrox serve: GGUF models over an OpenAI-compatible API ($tag)" \
    --label org.opencontainers.image.licenses=MIT \
    "$ctr"
"${buildah[@]}" commit --quiet --format oci --rm "$ctr" "localhost/ferrox:$version-$tag" >/dev/null
trap cleanup EXIT
mkdir -p "$(dirname "$out")"
rm -f "$out"
"${buildah[@]}" push --quiet "localhost/ferrox:$version-$tag" "oci-archive:$out:ferrox:$version-$tag"
"${buildah[@]}" rmi "localhost/ferrox:$version-$tag" >/dev/null
echo "== wrote $out (ferrox:$version-$tag, $(du -h "$out" | cut -f1))"
