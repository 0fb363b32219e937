#!/usr/bin/env python3
"""Reads an OCI image archive as a runtime would and checks what ferrox's image
promises, independently of the script that built it.

    check_image.py IMAGE.tar UNPACK_DIR

1. The layout: oci-layout, index.json -> manifest -> config and layers, every blob's
   SHA-256 and size equal to what names it, each layer's uncompressed digest equal
   to the config's diff_ids (what podman and containerd verify on load).
2. The config: a numeric non-root User, ferrox serve as entrypoint + cmd binding
   0.0.0.0:8080 (the server then refuses to start without API keys), port 8080/tcp
   exposed, SIGTERM as the stop signal (the server drains on it).
3. The layers unpacked into UNPACK_DIR (in order; a whiteout is refused: the image
   is one layer from scratch), then: the entrypoint is there and executable, no
   file is setuid or setgid, nothing is world-writable but sticky folders.

Prints the config's "config" object as JSON on success; exits 1 naming the first
check that failed.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import stat
import subprocess
import sys
import tarfile
import tempfile

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TYPES = {"application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.v1.tar+gzip"}


class Refused(Exception):
    pass


def require(cond: bool, what: str) -> None:
    if not cond:
        raise Refused(what)


def sha256_file(path: pathlib.Path, opener=open) -> str:
    h = hashlib.sha256()
    with opener(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def blob(root: pathlib.Path, descriptor: dict, media_types: set[str]) -> pathlib.Path:
    require(descriptor.get("mediaType") in media_types,
            f"descriptor {descriptor.get('digest')}: media type {descriptor.get('mediaType')!r}")
    algo, _, hexdigest = descriptor["digest"].partition(":")
    require(algo == "sha256" and len(hexdigest) == 64 and all(c in "0123456789abcdef" for c in hexdigest),
            f"digest {descriptor['digest']!r} is not a sha256")
    path = root / "blobs" / "sha256" / hexdigest
    require(path.is_file(), f"blob {descriptor['digest']} is missing")
    require(path.stat().st_size == descriptor["size"],
            f"blob {descriptor['digest']}: {path.stat().st_size} bytes, descriptor says {descriptor['size']}")
    require(sha256_file(path) == descriptor["digest"], f"blob {descriptor['digest']}: content does not match")
    return path


def check_config(cfg: dict) -> None:
    user = cfg.get("User", "")
    uid = user.split(":")[0]
    require(uid.isdigit() and int(uid) != 0, f"User is {user!r}: the image must run as a numeric non-root uid")
    entry = cfg.get("Entrypoint") or []
    cmd = cfg.get("Cmd") or []
    require(entry == ["/usr/bin/ferrox"], f"Entrypoint is {entry}")
    require(cmd[:1] == ["serve"], f"Cmd is {cmd}")
    require("--host" in cmd and cmd[cmd.index("--host") + 1] == "0.0.0.0", f"Cmd does not bind 0.0.0.0: {cmd}")
    require("--port" in cmd and cmd[cmd.index("--port") + 1] == "8080", f"Cmd's port is not 8080: {cmd}")
    require("8080/tcp" in (cfg.get("ExposedPorts") or {}), f"ExposedPorts: {cfg.get('ExposedPorts')}")
    require(cfg.get("StopSignal") == "SIGTERM", f"StopSignal is {cfg.get('StopSignal')!r}")


def unpack(layer: pathlib.Path, media_type: str, dest: pathlib.Path) -> None:
    mode = "r:gz" if media_type.endswith("+gzip") else "r:"
    with tarfile.open(layer, mode) as tar:
        for member in tar:
            name = pathlib.PurePosixPath(member.name)
            require(not name.name.startswith(".wh."), f"layer {layer.name}: whiteout {member.name}")
            require(not name.is_absolute() and ".." not in name.parts, f"layer {layer.name}: path {member.name}")
    # GNU tar keeps owners, modes and device nodes exactly as a runtime does.
    flag = "-z" if media_type.endswith("+gzip") else ""
    subprocess.run(["tar", "-x", *([flag] if flag else []), "--numeric-owner", "-p", "-f", str(layer),
                    "-C", str(dest)], check=True)


def check_tree(rootfs: pathlib.Path, entrypoint: str) -> None:
    exe = rootfs / entrypoint.lstrip("/")
    require(exe.is_file() and os.access(exe, os.X_OK), f"{entrypoint} is not an executable file in the image")
    for dirpath, dirnames, filenames in os.walk(rootfs):
        for name in dirnames + filenames:
            path = pathlib.Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            rel = "/" + str(path.relative_to(rootfs))
            require(not st.st_mode & (stat.S_ISUID | stat.S_ISGID) or stat.S_ISDIR(st.st_mode),
                    f"{rel} is setuid or setgid")
            if st.st_mode & stat.S_IWOTH:
                require(stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX,
                        f"{rel} is world-writable")


def main() -> int:
    archive, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="data")
        try:
            layout = json.loads((root / "oci-layout").read_text())
            require(layout.get("imageLayoutVersion") == "1.0.0", f"oci-layout: {layout}")
            index = json.loads((root / "index.json").read_text())
            manifests = index.get("manifests") or []
            require(len(manifests) == 1, f"index.json lists {len(manifests)} manifests")
            manifest = json.loads(blob(root, manifests[0], {MANIFEST}).read_text())
            config_doc = json.loads(blob(root, manifest["config"], {CONFIG}).read_text())
            require(config_doc.get("os") == "linux" and config_doc.get("architecture") == "amd64",
                    f"platform {config_doc.get('os')}/{config_doc.get('architecture')}")
            cfg = config_doc.get("config") or {}
            check_config(cfg)
            diff_ids = config_doc["rootfs"]["diff_ids"]
            layers = manifest["layers"]
            require(len(layers) == len(diff_ids), f"{len(layers)} layers, {len(diff_ids)} diff_ids")
            for layer, diff_id in zip(layers, diff_ids):
                path = blob(root, layer, LAYER_TYPES)
                opener = gzip.open if layer["mediaType"].endswith("+gzip") else open
                require(sha256_file(path, opener) == diff_id, f"layer {layer['digest']}: diff_id mismatch")
                unpack(path, layer["mediaType"], dest)
            check_tree(dest, cfg["Entrypoint"][0])
        except Refused as e:
            print(f"check_image: {archive}: {e}", file=sys.stderr)
            return 1
    print(json.dumps(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
