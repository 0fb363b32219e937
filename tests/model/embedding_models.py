"""Tiny embedding models for the embedding tests: Qwen3-Embedding's shape, a
`qwen3` decoder whose `qwen3.pooling_type` says how its final-norm hidden rows
are pooled (1 mean, 2 cls, 3 last), and Qwen3-Reranker's (4 rank, with a
classifier head and the rerank template). Each is tiny-qwen3 (tests/model/
make_tiny_models.py: random weights, llama.cpp's qwen2 vocabulary) with those
keys (and the head) appended, every other byte copied: making a model, or copying one
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
    extra = [] if pooling == "none" else [kv_u32("qwen3.pooling_type", POOLING[pooling])]
    path.write_bytes(rewrite(BASE.read_bytes(), extra, []))
    return path


# Qwen3-Reranker's rerank template as llama.cpp's converter writes it
# (tokenizer.chat_template.rerank; the server replaces {query} and {document}).
RERANK_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
    "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that "
    "answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n")
RERANK_SEED = 3300


def make_reranker_model(out_dir: pathlib.Path, template: bool = True, labels=("yes", "no"),
                        swap_labels: bool = False, head: bool = True) -> pathlib.Path:
    """tiny-qwen3 as Qwen3-Reranker's GGUF: `qwen3.pooling_type` rank, the labels
    `qwen3.classifier.output_labels`, a random f32 head `cls.output.weight` [n_embd, labels]
    (seeded), and the rerank template unless `template` is false. swap_labels: the head's
    rows in the other order (a fault the parity test must catch); head false: no head."""
    import numpy as np
    data = BASE.read_bytes()
    n_embd = read_u32_key(data, b"qwen3.embedding_length")
    rows = 0.1 * np.random.default_rng(RERANK_SEED).standard_normal((len(labels), n_embd))
    if swap_labels:
        rows = rows[::-1]
    name = "tiny-qwen3-rerank" + ("" if template else "-plain") + ("-swapped" if swap_labels else "") \
        + ("" if head else "-headless") + ("" if len(labels) == 2 else f"-{len(labels)}")
    path = out_dir / f"{name}.gguf"
    extra = [kv_u32("qwen3.pooling_type", 4), kv_strings("qwen3.classifier.output_labels", labels)]
    if template:
        extra.append(kv_string("tokenizer.chat_template.rerank", RERANK_TEMPLATE))
    tensors = [("cls.output.weight", (n_embd, len(labels)), rows.astype("<f4").tobytes())] if head else []
    path.write_bytes(rewrite(data, extra, tensors))
    return path


def kv_name(key: str) -> bytes:
    k = key.encode()
    return struct.pack("<Q", len(k)) + k


def kv_u32(key: str, v: int) -> bytes:
    return kv_name(key) + struct.pack("<II", UINT32, v)


def kv_string(key: str, v: str) -> bytes:
    b = v.encode()
    return kv_name(key) + struct.pack("<IQ", STRING, len(b)) + b


def kv_strings(key: str, vs) -> bytes:
    out = kv_name(key) + struct.pack("<IIQ", ARRAY, STRING, len(vs))
    for v in vs:
        b = v.encode()
        out += struct.pack("<Q", len(b)) + b
    return out


def read_u32_key(data: bytes, name: bytes) -> int:
    w = Walker(data)
    w.at = 16
    n_kv = w.u64()
    for _ in range(n_kv):
        key = w.string()
        kind = w.u32()
        v = w.value(kind)
        if key == name:
            return struct.unpack("<I", v)[0]
    raise KeyError(name)


def rewrite(data: bytes, extra_kvs: list[bytes], extra_tensors: list[tuple]) -> bytes:
    """The GGUF `data` with key/values appended after its own, and f32 tensors (name, ggml
    dims, bytes) after its own, their data at the file's alignment after the existing data."""
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
    kv_end = w.at
    for _ in range(n_tensors):
        w.string()
        dims = w.u32()
        w.at += 8 * dims + 4 + 8
    infos_end = w.at
    data_start = -(-infos_end // alignment) * alignment
    blob = bytearray(data[data_start:])
    infos = b""
    for name, dims, raw in extra_tensors:
        blob += b"\0" * (-len(blob) % alignment)
        infos += kv_name(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", 0, len(blob))  # type F32, offset in the data section
        blob += raw
    head = data[:8] + struct.pack("<QQ", n_tensors + len(extra_tensors), n_kv + len(extra_kvs))
    body = head + data[kv_start:kv_end] + b"".join(extra_kvs) + data[kv_end:infos_end] + infos
    body += b"\0" * (-len(body) % alignment)
    return body + bytes(blob)


def rename_architecture(data: bytes, new: str) -> bytes:
    """The GGUF `data` as architecture `new`: general.architecture and every `<old>.` key
    renamed, everything else (tensors, tokenizer) as it was -- the same weights read through
    another architecture's graph (a causal one, for the encoder parity test's fault)."""
    w = Walker(data)
    assert data[:4] == b"GGUF"
    w.at = 8
    n_tensors, n_kv = w.u64(), w.u64()
    alignment, old, kvs = 32, None, []
    for _ in range(n_kv):
        key = w.string()
        kind_at = w.at
        kind = w.u32()
        v = w.value(kind)
        raw = data[kind_at:w.at]
        if key == b"general.alignment":
            alignment = struct.unpack("<I", v)[0]
        if key == b"general.architecture":
            old = v
            raw = struct.pack("<IQ", STRING, len(new)) + new.encode()
        kvs.append((key, raw))
    assert old is not None
    kv_end = w.at
    for _ in range(n_tensors):
        w.string()
        dims = w.u32()
        w.at += 8 * dims + 4 + 8
    infos_end = w.at
    data_start = -(-infos_end // alignment) * alignment
    body = data[:24]
    for key, raw in kvs:
        if key.startswith(old + b"."):
            key = new.encode() + key[len(old):]
        body += struct.pack("<Q", len(key)) + key + raw
    body += data[kv_end:infos_end]
    body += b"\0" * (-len(body) % alignment)
    return body + data[data_start:]


def set_u32_key(data: bytes, name: str, value: int) -> bytes:
    """The GGUF `data` with its UINT32 key `name` set to `value` (same size: in place)."""
    w = Walker(data)
    w.at = 16
    n_kv = w.u64()
    for _ in range(n_kv):
        key = w.string()
        kind = w.u32()
        at = w.at
        w.value(kind)
        if key == name.encode():
            assert kind == UINT32, (name, kind)
            return data[:at] + struct.pack("<I", value) + data[at + 4:]
    raise KeyError(name)
