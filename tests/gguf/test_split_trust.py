"""Split GGUF shards are opened under the first shard's rules: read only from the
folder the first shard really lies in, and only as regular files. The shards are
written by the independent `gguf` package (split_max_tensors, llama.cpp's naming).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)


def write_shards(folder: pathlib.Path) -> list[pathlib.Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(40)
    w = gguf.GGUFWriter(str(folder / "m.gguf"), "llama", split_max_tensors=1)
    w.add_name("split trust")
    for name in ("a.weight", "b.weight"):
        w.add_tensor(name, rng.standard_normal((4, 32)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shards = sorted(folder.glob("m-*-of-*.gguf"))
    assert [s.name for s in shards] == ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
    return shards


# The files hold no model (two bare tensors): `inspect` prints the file, its shards
# included, then refuses the missing hyper-parameters. A refused shard stops it first.
def inspect(first: pathlib.Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FERROX_CONFIG"}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    return subprocess.run([FERROX, "inspect", str(first)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60, env=env)


def test_plain_shards_open(tmp_path):
    first, _ = write_shards(tmp_path / "plain")
    r = inspect(first)
    assert b"shards: 2 files" in r.stdout, r.stderr


def test_a_shard_linked_out_of_the_folder_is_refused_by_name(tmp_path):
    first, second = write_shards(tmp_path / "model")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / second.name
    shutil.move(second, moved)
    second.symlink_to(moved)  # a valid shard, but outside the first shard's folder
    r = inspect(first)
    assert r.returncode == 2, r.stderr
    assert b"shards:" not in r.stdout
    err = r.stderr.decode()
    assert str(second) in err and str(moved) in err and "outside" in err


def test_a_shard_name_linked_to_a_non_gguf_file_is_refused_before_reading_it(tmp_path):
    first, second = write_shards(tmp_path / "model")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the model")
    second.unlink()
    second.symlink_to(secret)
    r = inspect(first)
    assert r.returncode == 2
    assert b"shards:" not in r.stdout
    assert b"outside" in r.stderr and b"magic" not in r.stderr


def test_shards_linked_into_one_folder_as_a_hub_cache_does_open(tmp_path):
    blobs = tmp_path / "blobs"
    real = write_shards(blobs)
    snapshot = tmp_path / "snapshots" / "rev"
    snapshot.mkdir(parents=True)
    for shard in real:
        (snapshot / shard.name).symlink_to(shard)
    r = inspect(snapshot / real[0].name)
    assert b"shards: 2 files" in r.stdout, r.stderr
    assert str(snapshot / real[1].name).encode() in r.stdout  # named as linked, not as the blob


def test_a_folder_under_a_shard_name_is_refused(tmp_path):
    first, second = write_shards(tmp_path / "model")
    second.unlink()
    second.mkdir()
    r = inspect(first)
    assert r.returncode == 2
    assert b"shards:" not in r.stdout
    assert b"not a regular file" in r.stderr
