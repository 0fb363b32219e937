#!/usr/bin/env python3
"""Tiny random-weight GGUF models, one per architecture, for llama.cpp parity.

    python3 tests/model/make_tiny_models.py [OUT_DIR]   (default ~/.cache/ferrox/tiny-models)

Weights are Gaussian with a fan-in spread (1/sqrt(cols)), norms near 1;
attention weights are Q8_0, FFN weights Q4_0 (gguf.quants.quantize), norms,
biases and the MoE router F32. The tokenizer metadata is copied from
llama.cpp's vocab-only GGUFs (~/.cache/ferrox/vocab or $FERROX_VOCAB_DIR,
ci/fetch_test_data.sh), so llama.cpp loads the result like a real model.
Deterministic: the same seed gives the same files.
"""
from __future__ import annotations

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
}


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


def make(arch: str, out_dir: pathlib.Path, seed: int) -> pathlib.Path:
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
        print(make(arch, out_dir, 1000 + seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
