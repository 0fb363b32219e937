"""Tiny embedding models for the embedding tests: Qwen3-Embedding's shape, a
`qwen3` decoder whose `qwen3.pooling_type` says how its final-norm hidden rows
are pooled (1 mean, 2 cls, 3 last). Each is tiny-qwen3 (tests/model/
make_tiny_models.py: random weights, llama.cpp's qwen2 vocabulary) with that
one key inserted, every other byte copied: making a model, or copying one
through the `gguf` package's reader and writer (151,646 vocabulary strings),
takes 20-30 s on a loaded machine; this takes well under one. The GGUF layout
walked here is the format's (header, key/values, tensor infos, data at the
file's alignment); the result is read back by the `gguf` package in the tests
that use it. Written into the caller's folder, never the shared tiny-model
cache, whose every file the other tests run as a text generator."""
from __future__ import annotations

import os
import pathlib
import struct

POOLING = {"mean": 1, "cls": 2, "last": 3}
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
BASE = TINY / "tiny-qwen3.gguf"

# GGUF value types: fixed sizes, 8 string, 9 array.
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32 = 8, 9, 4


def base_missing() -> str | None:
    return None if BASE.exists() else f"{BASE} is absent (tests/model/make_tiny_models.py makes it)"


class Walker:
    def __init__(self, data: bytes):
        self.d, self.at = data, 0

    def u32(self) -> int:
        (v,) = struct.unpack_from("<I", self.d, self.at)
        self.at += 4
        return v

    def u64(self) -> int:
        (v,) = struct.unpack_from("<Q", self.d, self.at)
        self.at += 8
        return v

    def string(self) -> bytes:
        n = self.u64()
        self.at += n
        return self.d[self.at - n:self.at]

    def value(self, kind: int):
        if kind in FIXED:
            self.at += FIXED[kind]
            return self.d[self.at - FIXED[kind]:self.at]
        if kind == STRING:
            return self.string()
        assert kind == ARRAY, kind
        inner, n = self.u32(), self.u64()
        if inner in FIXED:
            self.at += FIXED[inner] * n
        else:
            for _ in range(n):
                self.value(inner)
        return None


def make_embedding_model(out_dir: pathlib.Path, pooling: str) -> pathlib.Path:
    """tiny-qwen3 with `qwen3.pooling_type` = POOLING[pooling] ("none": a plain copy)."""
    path = out_dir / f"tiny-qwen3-embed-{pooling}.gguf"
    data = BASE.read_bytes()
    w = Walker(data)
    assert data[:4] == b"GGUF"
    w.at = 8
    n_tensors, n_kv = w.u64(), w.u64()
    kv_start = w.at
    alignment = 32
    for _ in range(n_kv):
        key = w.string()
        kind = w.u32()
        v = w.value(kind)
        if key == b"general.alignment":
            alignment = struct.unpack("<I", v)[0]
    for _ in range(n_tensors):
        w.string()
        dims = w.u32()
        w.at += 8 * dims + 4 + 8
    infos_end = w.at
    data_start = -(-infos_end // alignment) * alignment
    extra = b""
    if pooling != "none":
        key = b"qwen3.pooling_type"
        extra = struct.pack("<Q", len(key)) + key + struct.pack("<II", UINT32, POOLING[pooling])
    head = data[:8] + struct.pack("<QQ", n_tensors, n_kv + (1 if extra else 0))
    body = head + extra + data[kv_start:infos_end]
    body += b"\0" * (-len(body) % alignment)
    path.write_bytes(body + data[data_start:])
    return path
