#!/usr/bin/env python3
"""Tiny random-weight GGUF models, one per architecture, for llama.cpp parity.

    python3 tests/model/make_tiny_models.py [OUT_DIR]   (default ~/.cache/ferrox/tiny-models)

Weights are Gaussian with a fan-in spread (1/sqrt(cols)), norms near 1;
attention weights are Q8_0, FFN weights Q4_0 (gguf.quants.quantize), norms,
biases and the MoE router F32. The tokenizer metadata is copied from
llama.cpp's vocab-only GGUFs (~/.cache/ferrox/vocab or $FERROX_VOCAB_DIR,
ci/fetch_test_data.sh), so llama.cpp loads the result like a real model.
Deterministic: the same seed gives the same files.

tiny-gemma3 mirrors Gemma 3's structure: 6 layers (five sliding-window layers,
the sixth global), a window of 8 positions so the 48-token parity sequences
cross it several times, 8 query heads over 2 KV heads (GQA 4:1; head_dim 64 !=
n_embd / n_head, so a wrong attention scale shows), q/k norms, post-attention
and post-FFN norms, GeGLU, tied embeddings scaled by sqrt(n_embd), rope bases
1e6 (global) and 10000 (local, the architecture's default), and the Q4_K_M type
mix of the real 270M file (Q5_0 q/k/gate/up, Q8_0/Q5_0 v, Q4_K attention
output, Q6_K/Q4_K down, Q8_0 embeddings). Norm weights are log-normal (pre-norms
~3, post-norms ~0.5, tails to several times that). The real model's q/k norms
(~2) and pre-norms (~10) make *random* attention so sharp that 8-bit activation
rounding alone moves the logits by ~1e-2 NMSE in both engines, as much as a
real bug; with these values both sit ~1e-3 from a float64 evaluation, as they
do on the real model, while an off-by-one window, a wrong rope base or layer
pattern costs > 1e-1. K-quants are encoded by llama.cpp's ggml_quantize_chunk
(libggml-base from llama-cpp-python): gguf-py has no K-quant encoder.
"""
from __future__ import annotations

import ctypes
import functools
import os
import pathlib
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

CACHE = pathlib.Path(os.environ.get("FERROX_CACHE_DIR", pathlib.Path.home() / ".cache" / "ferrox"))
VOCAB_DIR = pathlib.Path(os.environ.get("FERROX_VOCAB_DIR", CACHE / "vocab"))

N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF, N_LAYER, N_CTX = 128, 4, 2, 32, 256, 2, 256
N_EXPERT, N_EXPERT_USED, N_FF_EXP = 4, 2, 64

# arch -> (vocab file, options)
MODELS = {
    "llama": ("llama-spm", {"tied": False}),
    "qwen2": ("qwen2", {"tied": True, "bias": True}),
    "qwen3": ("qwen2", {"tied": False, "qk_norm": True}),
    "qwen3moe": ("qwen2", {"tied": False, "qk_norm": True, "moe": True}),
    "gemma3": ("llama-spm", {}),  # made by make_gemma3
}

# tiny-gemma3: every row length a multiple of 256 so that K-quants apply.
G_EMBD, G_HEAD, G_HEAD_KV, G_HEAD_DIM, G_FF, G_LAYER, G_WINDOW = 256, 8, 2, 64, 512, 6, 8


def copy_tokenizer(writer: gguf.GGUFWriter, vocab_path: pathlib.Path) -> int:
    reader = gguf.GGUFReader(str(vocab_path))
    n_vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, vtype, sub_type=sub)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(value)
    return n_vocab


def matrix(rng, rows: int, cols: int) -> np.ndarray:
    return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)


def norm(rng, n: int) -> np.ndarray:
    return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)


def add_quantized(writer: gguf.GGUFWriter, name: str, data: np.ndarray, qtype: Q) -> None:
    writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


@functools.lru_cache(maxsize=1)
def libggml() -> ctypes.CDLL:
    """llama.cpp's quantizers, from the libggml-base that llama-cpp-python ships."""
    import llama_cpp  # noqa: F401  (only to find its lib directory)

    lib_dir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    lib = ctypes.CDLL(str(next(iter(sorted(lib_dir.glob("libggml-base.so*"))))))
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return lib


def add_kquant(writer: gguf.GGUFWriter, name: str, data: np.ndarray, qtype: Q) -> None:
    lib = libggml()
    src = np.ascontiguousarray(data, dtype=np.float32)
    rows, cols = src.shape
    row_bytes = lib.ggml_row_size(int(qtype), cols)
    dst = np.zeros((rows, row_bytes), dtype=np.uint8)
    written = lib.ggml_quantize_chunk(int(qtype), src.ctypes.data, dst.ctypes.data, 0, rows, cols, None)
    assert written == rows * row_bytes, (name, written, rows * row_bytes)
    writer.add_tensor(name, dst, raw_dtype=qtype)


def gemma_norm(rng, n: int, scale: float, sigma: float) -> np.ndarray:
    """Log-normal: positive, mostly near `scale`, a tail to several times it (as Gemma's)."""
    return (scale * np.exp(sigma * rng.standard_normal(n))).astype(np.float32)


def make_gemma3(out_dir: pathlib.Path, seed: int) -> pathlib.Path:
    rng = np.random.default_rng(seed)
    path = out_dir / "tiny-gemma3.gguf"
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_name("tiny random gemma3")
    n_vocab = copy_tokenizer(w, VOCAB_DIR / f"ggml-vocab-{MODELS['gemma3'][0]}.gguf")
    w.add_context_length(N_CTX)
    w.add_embedding_length(G_EMBD)
    w.add_block_count(G_LAYER)
    w.add_feed_forward_length(G_FF)
    w.add_head_count(G_HEAD)
    w.add_head_count_kv(G_HEAD_KV)
    w.add_key_length(G_HEAD_DIM)
    w.add_value_length(G_HEAD_DIM)
    w.add_rope_freq_base(1e6)  # global layers; local ones use the architecture's 10000
    w.add_sliding_window(G_WINDOW)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)

    # Entries ~1/sqrt(n_embd) as in the real model: ~1 after the sqrt(n_embd) scale. Tied output.
    add_quantized(w, "token_embd.weight", matrix(rng, n_vocab, G_EMBD), Q.Q8_0)
    w.add_tensor("output_norm.weight", gemma_norm(rng, G_EMBD, 4.0, 0.8))
    q_dim, kv_dim = G_HEAD * G_HEAD_DIM, G_HEAD_KV * G_HEAD_DIM
    for il in range(G_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", gemma_norm(rng, G_EMBD, 3.0, 0.6))
        add_quantized(w, p + "attn_q.weight", matrix(rng, q_dim, G_EMBD), Q.Q5_0)
        add_quantized(w, p + "attn_k.weight", matrix(rng, kv_dim, G_EMBD), Q.Q5_0)
        add_quantized(w, p + "attn_v.weight", matrix(rng, kv_dim, G_EMBD), Q.Q8_0 if il % 2 == 0 else Q.Q5_0)
        w.add_tensor(p + "attn_q_norm.weight", (1.0 + 0.8 * rng.standard_normal(G_HEAD_DIM)).astype(np.float32))
        w.add_tensor(p + "attn_k_norm.weight", (1.0 + 0.8 * rng.standard_normal(G_HEAD_DIM)).astype(np.float32))
        add_kquant(w, p + "attn_output.weight", matrix(rng, G_EMBD, q_dim), Q.Q4_K)
        w.add_tensor(p + "post_attention_norm.weight", gemma_norm(rng, G_EMBD, 0.5, 1.0))
        w.add_tensor(p + "ffn_norm.weight", gemma_norm(rng, G_EMBD, 3.0, 0.6))
        add_quantized(w, p + "ffn_gate.weight", matrix(rng, G_FF, G_EMBD), Q.Q5_0)
        add_quantized(w, p + "ffn_up.weight", matrix(rng, G_FF, G_EMBD), Q.Q5_0)
        add_kquant(w, p + "ffn_down.weight", matrix(rng, G_EMBD, G_FF), Q.Q6_K if il % 2 == 0 else Q.Q4_K)
        w.add_tensor(p + "post_ffw_norm.weight", gemma_norm(rng, G_EMBD, 0.5, 1.0))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def make(arch: str, out_dir: pathlib.Path, seed: int) -> pathlib.Path:
    if arch == "gemma3":
        return make_gemma3(out_dir, seed)
    vocab_name, opt = MODELS[arch]
    rng = np.random.default_rng(seed)
    path = out_dir / f"tiny-{arch}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny random {arch}")
    n_vocab = copy_tokenizer(w, VOCAB_DIR / f"ggml-vocab-{vocab_name}.gguf")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0 if arch == "llama" else 1e6)
    w.add_layer_norm_rms_eps(1e-6)
    if opt.get("moe"):
        w.add_expert_count(N_EXPERT)
        w.add_expert_used_count(N_EXPERT_USED)
        w.add_expert_feed_forward_length(N_FF_EXP)
        w.add_feed_forward_length(N_FF)
    else:
        w.add_feed_forward_length(N_FF)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)

    add_quantized(w, "token_embd.weight", (0.5 * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float32), Q.Q8_0)
    w.add_tensor("output_norm.weight", norm(rng, N_EMBD))
    if not opt["tied"]:
        add_quantized(w, "output.weight", matrix(rng, n_vocab, N_EMBD), Q.Q8_0)
    q_dim, kv_dim = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(rng, N_EMBD))
        add_quantized(w, p + "attn_q.weight", matrix(rng, q_dim, N_EMBD), Q.Q8_0)
        add_quantized(w, p + "attn_k.weight", matrix(rng, kv_dim, N_EMBD), Q.Q8_0)
        add_quantized(w, p + "attn_v.weight", matrix(rng, kv_dim, N_EMBD), Q.Q8_0)
        add_quantized(w, p + "attn_output.weight", matrix(rng, N_EMBD, q_dim), Q.Q8_0)
        if opt.get("bias"):
            for part, n in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
                w.add_tensor(p + f"attn_{part}.bias", (0.1 * rng.standard_normal(n)).astype(np.float32))
        if opt.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", norm(rng, HEAD_DIM))
            w.add_tensor(p + "attn_k_norm.weight", norm(rng, HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", norm(rng, N_EMBD))
        if opt.get("moe"):
            w.add_tensor(p + "ffn_gate_inp.weight", matrix(rng, N_EXPERT, N_EMBD))
            gate = np.stack([matrix(rng, N_FF_EXP, N_EMBD) for _ in range(N_EXPERT)])
            up = np.stack([matrix(rng, N_FF_EXP, N_EMBD) for _ in range(N_EXPERT)])
            down = np.stack([matrix(rng, N_EMBD, N_FF_EXP) for _ in range(N_EXPERT)])
            add_quantized(w, p + "ffn_gate_exps.weight", gate, Q.Q4_0)
            add_quantized(w, p + "ffn_up_exps.weight", up, Q.Q4_0)
            add_quantized(w, p + "ffn_down_exps.weight", down, Q.Q4_0)
        else:
            add_quantized(w, p + "ffn_gate.weight", matrix(rng, N_FF, N_EMBD), Q.Q4_0)
            add_quantized(w, p + "ffn_up.weight", matrix(rng, N_FF, N_EMBD), Q.Q4_0)
            add_quantized(w, p + "ffn_down.weight", matrix(rng, N_EMBD, N_FF), Q.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def main() -> int:
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else CACHE / "tiny-models"
    out_dir.mkdir(parents=True, exist_ok=True)
    for seed, arch in enumerate(MODELS):
        try:
            print(make(arch, out_dir, 1000 + seed))
        except ImportError as e:  # tiny-gemma3's K-quants need llama-cpp-python's libggml
            print(f"WARN: tiny-{arch} not made: {e} (ci/llama_cpp.sh installs llama-cpp-python)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
