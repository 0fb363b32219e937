#!/usr/bin/env python3
"""Writes the GGUF reader's fixtures with the independent `gguf` package.

For each fixture, tests/data/gguf/<name>.gguf plus <name>.json: a sidecar
saying what the package wrote -- metadata (type, value, byte offsets of key,
type and value), tensors (type, ggml shape, offsets, byte size, FNV-1a 64 of
the bytes) and the header layout. Offsets come from gguf.GGUFReader, not from
ferrox. Re-run after changing it:  python3 tests/gguf/make_fixtures.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

SEED = 20240611
OUT_DIR = Path(__file__).resolve().parent.parent / "data" / "gguf"
CORPUS_DIR = Path(__file__).resolve().parent / "fuzz_corpus"


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def quantized(rng, qtype, rows, row_len):
    """Bytes for a (rows, row_len) weight: the package's own quantizer where it
    has one, else random bytes (a reader does not decode them)."""
    values = rng.standard_normal((rows, row_len)).astype(np.float32)
    try:
        return gguf.quants.quantize(values, qtype), "gguf.quants.quantize"
    except (NotImplementedError, gguf.quants.QuantError, ValueError):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (rows, row_len // block * size), dtype=np.uint8)
        return raw, "random bytes"


# (key, value type, value, array element type) as handed to GGUFWriter.add_key_value.
ALL_TYPES_METADATA = [
    ("test.u8", V.UINT8, 200, None),
    ("test.i8", V.INT8, -100, None),
    ("test.u16", V.UINT16, 60000, None),
    ("test.i16", V.INT16, -30000, None),
    ("test.u32", V.UINT32, 4000000000, None),
    ("test.i32", V.INT32, -2000000000, None),
    ("test.f32", V.FLOAT32, 0.1, None),
    ("test.bool_true", V.BOOL, True, None),
    ("test.bool_false", V.BOOL, False, None),
    ("test.string", V.STRING, "h\u00e9llo \u2713", None),
    ("test.u64", V.UINT64, 2**63 + 5, None),
    ("test.i64", V.INT64, -(2**62) - 3, None),
    ("test.f64", V.FLOAT64, 0.1, None),
    ("test.arr.u8", V.ARRAY, [0, 1, 255], V.UINT8),
    ("test.arr.i8", V.ARRAY, [-128, 0, 127], V.INT8),
    ("test.arr.u16", V.ARRAY, [1, 65535], V.UINT16),
    ("test.arr.i16", V.ARRAY, [-32768, 32767], V.INT16),
    ("test.arr.u32", V.ARRAY, [7, 4294967295], V.UINT32),
    ("test.arr.i32", V.ARRAY, [-5, 6, -7], V.INT32),
    ("test.arr.f32", V.ARRAY, [1.5, -2.25, 0.1], V.FLOAT32),
    ("test.arr.bool", V.ARRAY, [True, False, True], V.BOOL),
    ("test.arr.u64", V.ARRAY, [2**64 - 1, 0], V.UINT64),
    ("test.arr.i64", V.ARRAY, [-(2**63), 2**63 - 1], V.INT64),
    ("test.arr.f64", V.ARRAY, [1e300, -0.5], V.FLOAT64),
    ("test.arr.string", V.ARRAY, ["a", "", "\u00fc"], V.STRING),
    ("test.arr.nested", V.ARRAY, [[1, 2, 3], [4], [5, 6]], None),
    ("test.arr.nested_strings", V.ARRAY, [["x", "y"], ["z"]], None),
    ("test.arr.nested3", V.ARRAY, [[[1], [2, 3]], [[4]]], None),
    ("tokenizer.ggml.tokens", V.ARRAY, ["<s>", "</s>", "hello", " world"], V.STRING),
    ("tokenizer.ggml.scores", V.ARRAY, [0.0, -1.0, -2.5, -3.75], V.FLOAT32),
    ("tokenizer.ggml.token_type", V.ARRAY, [3, 3, 1, 1], V.INT32),
    ("ferroxtest.context_length", V.UINT32, 4096, None),
    ("ferroxtest.rope.freq_base", V.FLOAT32, 10000.0, None),
]


def describe(value, vtype: V, sub_type: V | None):
    """The sidecar's typed description of a value, using the writer's typing rules."""
    if vtype == V.ARRAY:
        element = sub_type if sub_type is not None else V.get_type(value[0])
        return {"type": "ARRAY", "element_type": element.name,
                "items": [describe(item, element, None) for item in value]}
    if vtype == V.FLOAT32:
        value = float(np.float32(value))  # what the file holds, exactly
    if vtype == V.STRING:
        return {"type": "STRING", "value": value}
    return {"type": vtype.name, "value": value}


def write_fixture(name, metadata, tensors, alignment=None, version=None, corpus=False):
    path = OUT_DIR / f"{name}.gguf"
    writer = gguf.GGUFWriter(str(path), arch="ferroxtest")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    for key, vtype, value, sub_type in metadata:
        writer.add_key_value(key, value, vtype, sub_type=sub_type)
    for tname, data, raw_dtype, _ in tensors:
        writer.add_tensor(tname, data, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    if version is not None:  # v2 and v3 share the layout; only the field differs
        raw = bytearray(path.read_bytes())
        raw[4:8] = int(version).to_bytes(4, "little")
        path.write_bytes(bytes(raw))

    reader = gguf.GGUFReader(str(path))
    raw = path.read_bytes()
    expected_values = {"general.architecture": ("ferroxtest", V.STRING, None)}
    if alignment is not None:
        expected_values["general.alignment"] = (alignment, V.UINT32, None)
    for key, vtype, value, sub_type in metadata:
        expected_values[key] = (value, vtype, sub_type)

    kvs = []
    for field in reader.fields.values():
        if field.name.startswith("GGUF."):
            continue
        value, vtype, sub_type = expected_values[field.name]
        assert field.types[0] == vtype, field.name
        if vtype != V.ARRAY or sub_type is not None:  # the reader flattens nested arrays
            got = field.contents()
            want = describe(value, vtype, sub_type)
            if vtype == V.ARRAY:
                assert [i["value"] for i in want["items"]] == got, field.name
            else:
                assert want["value"] == got, field.name
        key_at = field.offset
        type_at = key_at + int(field.parts[0].nbytes + field.parts[1].nbytes)
        kvs.append({"key": field.name, "key_at": key_at, "type_at": type_at,
                    "value_at": type_at + 4, **describe(value, vtype, sub_type)})

    described_tensors = []
    for t, (tname, _, _, origin) in zip(reader.tensors, tensors):
        assert t.name == tname
        parts = t.field.parts  # name length, name, n_dims, dims, type, offset
        at = [t.field.offset]
        for p in parts:
            at.append(at[-1] + int(p.nbytes))
        data = raw[t.data_offset:t.data_offset + t.n_bytes]
        described_tensors.append({
            "name": t.name, "type": t.tensor_type.name, "type_id": int(t.tensor_type),
            "shape": [int(d) for d in parts[3]], "n_elements": int(t.n_elements),
            "byte_size": int(t.n_bytes), "offset": int(parts[5][0]),
            "file_offset": int(t.data_offset), "fnv1a64": fnv1a64(data), "bytes_from": origin,
            "name_at": at[0], "n_dims_at": at[2], "dims_at": at[3], "type_at": at[4],
            "offset_at": at[5]})

    sidecar = {
        "file": path.name, "written_by": f"gguf (python) GGUFWriter, seed {SEED}",
        "version": version if version is not None else gguf.GGUF_VERSION,
        "alignment": alignment if alignment is not None else gguf.GGUF_DEFAULT_ALIGNMENT,
        "file_size": len(raw), "data_offset": int(reader.data_offset),
        "tensor_count_at": 8, "kv_count_at": 16,
        "metadata": kvs, "tensors": described_tensors,
    }
    (OUT_DIR / f"{name}.json").write_text(json.dumps(sidecar, indent=1, ensure_ascii=False) + "\n")
    if corpus:
        (CORPUS_DIR / f"{name}.gguf").write_bytes(raw)
    print(f"{path}: {len(raw)} bytes, {len(kvs)} keys, {len(described_tensors)} tensors")


def tensor(rng, name, qtype, rows, row_len):
    data, origin = quantized(rng, qtype, rows, row_len)
    return (name, data, qtype, origin)


def main():
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")

    write_fixture("all_types_v3", ALL_TYPES_METADATA, [
        ("f32.weight", rng.standard_normal((3, 8)).astype(np.float32), None, "numpy"),
        ("f16.weight", rng.standard_normal((2, 32)).astype(np.float16), None, "numpy"),
        tensor(rng, "bf16.weight", Q.BF16, 2, 16),
        tensor(rng, "q4_0.weight", Q.Q4_0, 2, 64),
        tensor(rng, "q4_1.weight", Q.Q4_1, 1, 32),
        tensor(rng, "q5_0.weight", Q.Q5_0, 3, 32),
        tensor(rng, "q5_1.weight", Q.Q5_1, 1, 64),
        tensor(rng, "q8_0.weight", Q.Q8_0, 4, 32),
        tensor(rng, "mxfp4.weight", Q.MXFP4, 1, 64),
        tensor(rng, "q2_k.weight", Q.Q2_K, 1, 256),
        tensor(rng, "q4_k.weight", Q.Q4_K, 2, 256),
        tensor(rng, "q6_k.weight", Q.Q6_K, 1, 256),
        tensor(rng, "iq4_xs.weight", Q.IQ4_XS, 1, 256),
        ("rank4.weight", rng.standard_normal((2, 2, 3, 4)).astype(np.float32), None, "numpy"),
    ], corpus=True)

    write_fixture("aligned64_v3", [("ferroxtest.block_count", V.UINT32, 2, None)], [
        ("odd.weight", rng.standard_normal((5,)).astype(np.float32), None, "numpy"),
        tensor(rng, "q8_0.weight", Q.Q8_0, 3, 32),
        ("rank3.weight", rng.standard_normal((2, 3, 5)).astype(np.float16), None, "numpy"),
    ], alignment=64, corpus=True)

    write_fixture("small_v2", [
        ("ferroxtest.context_length", V.UINT32, 128, None),
        ("tokenizer.ggml.tokens", V.ARRAY, ["a", "b"], V.STRING),
        ("test.arr.nested", V.ARRAY, [[1, 2], [3]], None),
    ], [
        ("a.weight", rng.standard_normal((2, 4)).astype(np.float32), None, "numpy"),
        tensor(rng, "b.weight", Q.Q4_0, 1, 32),
    ], version=2, corpus=True)

    write_fixture("metadata_only_v3", [("test.string", V.STRING, "no tensors", None)], [],
                  corpus=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
