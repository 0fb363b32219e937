#!/usr/bin/env python3
"""Generates the quant reference's golden vectors in tests/data/quant/.

    python3 tests/quant/gen_vectors.py        # fixed seed: re-running reproduces the files

For every kind of ferrox's kind table it builds random blocks in ggml's byte
layout -- integer parts are random bytes; f16 scales/mins cycle through
special values (+-0, subnormals, +-max, +-Inf, NaNs) and then random finite
values of either sign -- and records what `gguf.quants.dequantize` makes of
them. gguf has no dequantizer for Q8_1 and Q8_K (activation-only formats);
for those two this script's own numpy code, written in gguf's style from
ggml's definitions, supplies the expected values (marked in the manifest).
gguf 0.19 knows Q1_0's id and block size but cannot dequantize it: its
expected values come from llama.cpp's own reference dequantizer
(ggml_get_type_traits(Q1_0)->to_float in the libggml-base.so that
ci/llama_cpp.sh builds), called through ctypes, and the manifest records that
library's block shape for it too ("llama_cpp_type_sizes").

The kinds added after MXFP4 draw from a generator of their own (seeded with
SEED and the kind's id), so adding them left every earlier file unchanged.

Files (all little-endian):
  <KIND>.bin           dequantization vectors:
                         "FXQV", u32 version=1, u32 ggml id, u32 block_elements,
                         u32 block_bytes, u32 n_blocks, block bytes, float32 expected
  quantize_<KIND>.bin  gguf.quants.quantize vectors (F16, BF16, Q8_0, Q4_0):
                         "FXQQ", same five u32, float32 input, expected block bytes
  grids.bin            gguf's decoded i-quant grids, int8, at the manifest's offsets
  manifest.json        seed, gguf/numpy versions, per-file provenance, and
                         gguf.GGML_QUANT_SIZES (block sizes) for every type gguf knows
"""
import ctypes
import glob
import json
import os
import struct
from importlib.metadata import version
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

SEED = 20250117
OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "quant"

# ferrox's kind table: (name, block_elements, block_bytes). Q8_1 is ggml's
# 36-byte block (f16 d, f16 s, int8 qs[32]); gguf's GGML_QUANT_SIZES still
# lists a stale 40.
KINDS = [
    ("F32", 1, 4), ("F16", 1, 2), ("BF16", 1, 2),
    ("Q4_0", 32, 18), ("Q4_1", 32, 20), ("Q5_0", 32, 22), ("Q5_1", 32, 24),
    ("Q8_0", 32, 34), ("Q8_1", 32, 36),
    ("Q2_K", 256, 84), ("Q3_K", 256, 110), ("Q4_K", 256, 144), ("Q5_K", 256, 176),
    ("Q6_K", 256, 210), ("Q8_K", 256, 292),
    ("IQ2_XXS", 256, 66), ("IQ2_XS", 256, 74), ("IQ3_XXS", 256, 98), ("IQ1_S", 256, 50),
    ("IQ4_NL", 32, 18), ("IQ3_S", 256, 110), ("IQ2_S", 256, 82), ("IQ4_XS", 256, 136),
    ("IQ1_M", 256, 56), ("MXFP4", 32, 17),
    ("TQ1_0", 256, 54), ("TQ2_0", 256, 66), ("NVFP4", 64, 36), ("Q1_0", 128, 18),
]
# Added after MXFP4: each draws from its own generator (see the docstring).
LATER_KINDS = {"TQ1_0", "TQ2_0", "NVFP4", "Q1_0"}
# Kinds gguf 0.19 has no dequantizer for: llama.cpp's decodes them instead.
LLAMA_CPP_DEQUANTIZED = {"Q1_0"}

# Byte offsets of each kind's f16 fields (scales and mins).
F16_FIELDS = {
    "Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q8_1": [0, 2],
    "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
    "IQ2_XXS": [0], "IQ2_XS": [0], "IQ3_XXS": [0], "IQ1_S": [0], "IQ4_NL": [0],
    "IQ3_S": [0], "IQ2_S": [0], "IQ4_XS": [0],
    "TQ1_0": [52], "TQ2_0": [64], "Q1_0": [0],
}

# NVFP4's unsigned E4M3 scale bytes worth seeing: zero, the smallest and
# largest subnormals, the smallest normal, one, the largest finite (0x7E),
# E4M3's NaN pattern (0x7F, read as 0), and bytes with the unused top bit set.
SPECIAL_UE4M3 = [0x00, 0x01, 0x07, 0x08, 0x38, 0x7E, 0x7F, 0x80, 0x81, 0xB8, 0xFE, 0xFF]

SPECIAL_F16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x8200, 0x0400, 0x3C00, 0xBC00, 0x7BFF,
               0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00]
SPECIAL_F32 = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000,
               0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
               0x7F800001, 0xFFC00000]

rng = np.random.default_rng(SEED)


def random_finite_f16() -> int:
    exponent = int(rng.integers(0, 31))  # 0 = subnormal, never 31 (Inf/NaN)
    return int(rng.integers(0, 2)) << 15 | exponent << 10 | int(rng.integers(0, 1024))


def f16_for(block: int, field: int) -> int:
    if block < len(SPECIAL_F16):
        return SPECIAL_F16[(block + 7 * field) % len(SPECIAL_F16)]
    return random_finite_f16()


def random_blocks(name: str, n_blocks: int, block_bytes: int) -> np.ndarray:
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for b in range(n_blocks):
        for f, offset in enumerate(F16_FIELDS.get(name, [])):
            blocks[b, offset:offset + 2] = np.frombuffer(struct.pack("<H", f16_for(b, f)), np.uint8)
        if name == "IQ1_M":  # d is spread over the top nibbles of the four u16 scales
            d = f16_for(b, 0)
            for k in range(4):
                lo = 48 + 2 * k
                word = int(blocks[b, lo]) | int(blocks[b, lo + 1]) << 8
                word = (word & 0x0FFF) | ((d >> (4 * k)) & 0xF) << 12
                blocks[b, lo:lo + 2] = (word & 0xFF, word >> 8)
        if name == "Q8_K":
            bits = SPECIAL_F32[b] if b < len(SPECIAL_F32) else \
                int(np.float32(rng.choice([-1, 1]) * 2.0 ** rng.uniform(-30, 30)).view(np.uint32))
            blocks[b, 0:4] = np.frombuffer(struct.pack("<I", bits), np.uint8)
        if name == "MXFP4" and b < 8:
            blocks[b, 0] = [0, 1, 2, 126, 127, 128, 254, 255][b]
        if name == "NVFP4":  # every special byte in each of the four scale slots
            for s in range(4):
                k = b + 5 * s
                if k < 3 * len(SPECIAL_UE4M3):
                    blocks[b, s] = SPECIAL_UE4M3[k % len(SPECIAL_UE4M3)]
    return blocks


def float_elements(name: str) -> np.ndarray:
    """Raw element bytes for the plain float kinds."""
    if name == "F16":  # exhaustive: every half bit pattern
        return np.arange(65536, dtype=np.uint16).view(np.uint8)
    if name == "BF16":
        bits = np.concatenate([np.array([s >> 16 for s in SPECIAL_F32] + [0x7F81, 0xFFFF], np.uint16),
                               rng.integers(0, 65536, size=4096, dtype=np.uint16)])
        return bits.view(np.uint8)
    bits = np.concatenate([np.array(SPECIAL_F32, np.uint32),
                           rng.integers(0, 2**32, size=4096, dtype=np.uint32)])
    return bits.view(np.uint8)


# Local numpy dequantizers, gguf style, for the two kinds gguf lacks.
def dequantize_q8_1(blocks: np.ndarray) -> np.ndarray:
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
    return (d * blocks[:, 4:].copy().view(np.int8).astype(np.float32)).reshape(-1)


def dequantize_q8_k(blocks: np.ndarray) -> np.ndarray:
    d = blocks[:, 0:4].copy().view(np.float32)
    return (d * blocks[:, 4:260].copy().view(np.int8).astype(np.float32)).reshape(-1)


class GgmlTypeTraits(ctypes.Structure):
    """ggml.h's struct ggml_type_traits, the members up to to_float."""
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p)]


def ggml_base_library() -> ctypes.CDLL:
    """llama.cpp's libggml-base.so: $FERROX_GGML_BASE, the installed llama_cpp
    package's, or the build ci/llama_cpp.sh caches."""
    candidates = [os.environ.get("FERROX_GGML_BASE", "")]
    try:
        import llama_cpp
        candidates.append(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    except ImportError:
        pass
    candidates += sorted(glob.glob(os.path.expanduser("~/.cache/ferrox/llama.cpp-*/build-*/bin/libggml-base.so")))
    for path in candidates:
        if path and os.path.exists(path):
            return ctypes.CDLL(path)
    raise SystemExit("gen_vectors.py: Q1_0 needs llama.cpp's libggml-base.so (run ci/llama_cpp.sh "
                     "or set FERROX_GGML_BASE); looked in " + ", ".join(c for c in candidates if c))


def llama_cpp_dequantize(kind: str, raw: np.ndarray, manifest: dict) -> np.ndarray:
    """ggml's own to_float for a kind gguf does not know; records its block shape."""
    lib = ggml_base_library()
    lib.ggml_get_type_traits.restype = ctypes.POINTER(GgmlTypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    traits = lib.ggml_get_type_traits(int(T[kind])).contents
    assert traits.type_name.decode() == kind.lower(), traits.type_name
    manifest.setdefault("llama_cpp_type_sizes", {})[kind] = [traits.blck_size, traits.type_size]
    to_float = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(traits.to_float)
    src = np.ascontiguousarray(raw, dtype=np.uint8)
    n = src.size // traits.type_size * traits.blck_size
    out = np.empty(n, dtype=np.float32)
    to_float(src.ctypes.data, out.ctypes.data, n)
    return out


def header(magic: bytes, kind: str, block_elements: int, block_bytes: int, n_blocks: int) -> bytes:
    return magic + struct.pack("<5I", 1, int(T[kind]), block_elements, block_bytes, n_blocks)


def dequantization_vectors(manifest: dict) -> None:
    global rng
    shared_rng = rng
    for name, block_elements, block_bytes in KINDS:
        rng = np.random.default_rng([SEED, int(T[name])]) if name in LATER_KINDS else shared_rng
        if block_elements == 1:
            raw = float_elements(name)
            n_blocks = raw.size // block_bytes
        else:
            n_blocks = {32: 128, 64: 64, 128: 64}.get(block_elements, 32)
            raw = random_blocks(name, n_blocks, block_bytes).reshape(-1)
        with np.errstate(all="ignore"):
            if name in LLAMA_CPP_DEQUANTIZED:
                expected = llama_cpp_dequantize(name, raw, manifest)
                source = "llama.cpp ggml_get_type_traits(%s)->to_float (gguf has none)" % name
            elif name == "Q8_1":
                expected, source = dequantize_q8_1(raw.reshape(n_blocks, -1)), "local numpy (gguf has none)"
            elif name == "Q8_K":
                expected, source = dequantize_q8_k(raw.reshape(n_blocks, -1)), "local numpy (gguf has none)"
            else:
                expected, source = quants.dequantize(raw, T[name]), "gguf.quants.dequantize"
        expected = np.ascontiguousarray(expected, dtype=np.float32).reshape(-1)
        assert expected.size == n_blocks * block_elements, name
        (OUT / f"{name}.bin").write_bytes(header(b"FXQV", name, block_elements, block_bytes, n_blocks)
                                          + raw.tobytes() + expected.tobytes())
        manifest["dequantize"][name] = {"file": f"{name}.bin", "n_blocks": n_blocks, "source": source}
    rng = shared_rng


def quantize_inputs(name: str) -> np.ndarray:
    if name in ("F16", "BF16"):
        random_bits = rng.integers(0, 2**32, size=4096, dtype=np.uint32)
        # Values in and around the half range, plus exact ties between two
        # neighbouring halves / bfloats (the round-to-even cases).
        spread = (rng.choice([-1, 1], 2048) * 2.0 ** rng.uniform(-26, 17, 2048)).astype(np.float32)
        if name == "F16":
            halves = rng.integers(0, 0x7C00, size=2048, dtype=np.uint16).view(np.float16)
            ties = ((halves.astype(np.float64) + np.nextafter(halves, np.float16(np.inf)).astype(np.float64)) / 2)
            ties = ties.astype(np.float32)
        else:
            ties = ((rng.integers(0, 2**31, size=2048, dtype=np.uint32) & 0xFFFF0000) | 0x8000).view(np.float32)
        edges = np.array([65504, 65519.99, 65520, 65536, 2.0**-24, 2.0**-25, 2.0**-25 * 1.0001,
                          2.0**-14, 3 * 2.0**-26], np.float32)
        specials = np.array(SPECIAL_F32 + [0x7FBFFFFF, 0xFF801234, 0x7F802000], np.uint32).view(np.float32)
        return np.concatenate([specials, edges, -edges, ties, spread, random_bits.view(np.float32)])
    # Q8_0 / Q4_0: finite blocks at scales from tiny (f16 d underflows) to huge
    # (f16 d overflows), a zero block, exact rounding ties, and +-max ties.
    blocks = rng.standard_normal((256, 32)).astype(np.float32)
    blocks *= (10.0 ** rng.uniform(-7, 7, (256, 1))).astype(np.float32)
    blocks[0] = 0
    blocks[1] = np.arange(32, dtype=np.float32) - 15.5
    blocks[2] = np.float32(127) * np.where(np.arange(32) % 2 == 0, 1, -1)
    blocks[3, :] = rng.integers(-254, 255, 32) / np.float32(2)
    blocks[3, 5], blocks[3, 9] = -127, 127
    blocks[4] = np.float32(-8) * (rng.integers(0, 17, 32) / np.float32(16))
    return blocks.reshape(-1)


def quantization_vectors(manifest: dict) -> None:
    for name, block_elements, block_bytes in [("F16", 1, 2), ("BF16", 1, 2), ("Q8_0", 32, 34), ("Q4_0", 32, 18)]:
        inputs = quantize_inputs(name).astype(np.float32)
        with np.errstate(all="ignore"):
            encoded = np.ascontiguousarray(quants.quantize(inputs, T[name])).view(np.uint8).reshape(-1)
        n_blocks = inputs.size // block_elements
        assert encoded.size == n_blocks * block_bytes, name
        (OUT / f"quantize_{name}.bin").write_bytes(header(b"FXQQ", name, block_elements, block_bytes, n_blocks)
                                                   + inputs.tobytes() + encoded.tobytes())
        manifest["quantize"][name] = {"file": f"quantize_{name}.bin", "n_blocks": n_blocks,
                                      "source": "gguf.quants.quantize"}


def grid_vectors(manifest: dict) -> None:
    data = bytearray()
    for name in ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S"]:
        cls = getattr(quants, name)
        cls.init_grid()
        grid = cls.grid.reshape(cls.grid_shape).astype(np.int8)
        manifest["grids"][name] = {"offset": len(data), "rows": grid.shape[0], "cols": grid.shape[1]}
        data += grid.tobytes()
    (OUT / "grids.bin").write_bytes(bytes(data))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {
        "generator": "tests/quant/gen_vectors.py",
        "seed": SEED,
        "gguf_version": version("gguf"),
        "numpy_version": np.__version__,
        "gguf_quant_sizes": {t.name: list(s) for t, s in gguf.GGML_QUANT_SIZES.items()},
        "dequantize": {}, "quantize": {}, "grids": {},
    }
    dequantization_vectors(manifest)
    quantization_vectors(manifest)
    grid_vectors(manifest)
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
