#!/usr/bin/env python3
"""Writes the GGUF header of a published model's layout, for `ferrox_synth_gguf fill`.

Decode speed depends on tensor shapes and quant kinds, not on weight values, so the CPU
benchmarks of 7B-class models need only a file of the right layout. This script writes
what `ferrox_synth_gguf strip` would keep of the real file: metadata, a real tokenizer
(copied from llama.cpp's vocab-only test GGUF for that tokenizer family, padded to the
model's embedding rows as the converter pads it) and the tensor infos, with no tensor
data. `ferrox_synth_gguf fill HEADER OUT.gguf` then writes random valid blocks.

    python3 bench/shaped_header.py qwen2-7b-q4_k_m OUT.header [--vocab-dir DIR]

Layouts (hparams from the models' published config.json):
  qwen2-7b-q4_k_m   Qwen2-7B: 28 layers, 3584 wide, FFN 18944, 28 heads / 4 KV heads,
                    vocab 152064; Q4_K_M as llama.cpp's quantizer lays it out (Q6_K for
                    the output, and for attn_v and ffn_down on the layers its
                    "more bits" rule picks; Q4_K elsewhere; f32 norms and biases).
  qwen35-4b-q4_k_m  Qwen3.5-4B's text model: 32 layers, 2560 wide, every fourth full
                    attention (16 heads / 4 KV heads of 256, q carrying its gate, RoPE
                    over 64 dims in sections 11/11/10), the others Gated DeltaNet (16 key
                    heads / 32 value heads of 128, conv kernel 4), FFN 9216, vocab 248320,
                    output tied to the embeddings. Q4_K_M after llama.cpp's rules: the
                    tied embeddings Q6_K (they are the output), attn_qkv Q5_K, attn_v and
                    ffn_down Q6_K on the "more bits" layers, Q4_K elsewhere; the
                    convolution, decays and norms f32.
  qwen35moe-a3b-e64-q4_k_m
                    Qwen3.6-35B-A3B's text model with 64 of its 256 experts (the whole
                    file would not fit this machine's memory beside the engines): 40
                    layers, 2048 wide, attention 16 heads / 2 KV heads of 256, the same
                    DeltaNet layers as the 4B, 8 experts of 512 used per token plus a
                    shared expert of 512, untied output. A token reads the bytes the real
                    model's token reads (8 experts a layer); a batch of several sequences
                    reads fewer distinct experts than it would over 256. Q4_K_M as above,
                    the router and the shared expert's gate f32.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

import numpy as np
import gguf

CACHE = pathlib.Path(os.environ.get("FERROX_CACHE_DIR", pathlib.Path.home() / ".cache/ferrox"))
Q = gguf.GGMLQuantizationType

LAYOUTS = {
    "qwen2-7b-q4_k_m": dict(arch="qwen2", vocab="qwen2", n_vocab=152064, n_layer=28,
                            n_embd=3584, n_ff=18944, n_head=28, n_head_kv=4,
                            context=32768, rope_base=1e6, eps=1e-6, ftype=15),  # 15: Q4_K_M
    "qwen35-4b-q4_k_m": dict(arch="qwen35", vocab="qwen35", n_vocab=248320, n_layer=32,
                             n_embd=2560, n_ff=9216, n_head=16, n_head_kv=4, head_dim=256,
                             n_rot=64, sections=[11, 11, 10, 0], interval=4,
                             delta=dict(k_heads=16, v_heads=32, head_dim=128, kernel=4),
                             context=262144, rope_base=1e7, eps=1e-6, ftype=15),
    "qwen35moe-a3b-e64-q4_k_m": dict(arch="qwen35moe", vocab="qwen35", n_vocab=248320, n_layer=40,
                                     n_embd=2048, n_ff=512, n_head=16, n_head_kv=2, head_dim=256,
                                     n_rot=64, sections=[11, 11, 10, 0], interval=4,
                                     delta=dict(k_heads=16, v_heads=32, head_dim=128, kernel=4),
                                     experts=dict(count=64, used=8, ff=512, shared_ff=512),
                                     context=262144, rope_base=1e7, eps=1e-6, ftype=15),
}


def more_bits(layer: int, n_layer: int) -> bool:
    """The layers on which llama.cpp's Q4_K_M gives attn_v and ffn_down Q6_K: the
    first and last eighth, and every third layer in between."""
    return (layer < n_layer // 8 or layer >= 7 * n_layer // 8
            or (layer - n_layer // 8) % 3 == 2)


def tensors(cfg: dict) -> list[tuple[str, list[int], Q]]:
    """(name, [ne0, ne1], kind) of every tensor, in the converter's order."""
    e, f, v = cfg["n_embd"], cfg["n_ff"], cfg["n_vocab"]
    kv = e // cfg["n_head"] * cfg["n_head_kv"]
    out = [("token_embd.weight", [e, v], Q.Q4_K)]
    for i in range(cfg["n_layer"]):
        heavy = Q.Q6_K if more_bits(i, cfg["n_layer"]) else Q.Q4_K
        p = f"blk.{i}."
        out += [(p + "attn_norm.weight", [e], Q.F32),
                (p + "attn_q.weight", [e, e], Q.Q4_K), (p + "attn_q.bias", [e], Q.F32),
                (p + "attn_k.weight", [e, kv], Q.Q4_K), (p + "attn_k.bias", [kv], Q.F32),
                (p + "attn_v.weight", [e, kv], heavy), (p + "attn_v.bias", [kv], Q.F32),
                (p + "attn_output.weight", [e, e], Q.Q4_K),
                (p + "ffn_norm.weight", [e], Q.F32),
                (p + "ffn_gate.weight", [e, f], Q.Q4_K), (p + "ffn_up.weight", [e, f], Q.Q4_K),
                (p + "ffn_down.weight", [f, e], heavy)]
    out += [("output_norm.weight", [e], Q.F32), ("output.weight", [e, v], Q.Q6_K)]
    return out


def hybrid_tensors(cfg: dict) -> list[tuple[str, list[int], Q]]:
    """qwen35 / qwen35moe: (name, [ne0, ne1(, ne2)], kind) of every tensor."""
    e, v, hd = cfg["n_embd"], cfg["n_vocab"], cfg["head_dim"]
    d = cfg["delta"]
    inner = d["v_heads"] * d["head_dim"]
    conv = 2 * d["k_heads"] * d["head_dim"] + inner  # q, k and v through the convolution
    moe = cfg.get("experts")
    tied = moe is None
    out = [("token_embd.weight", [e, v], Q.Q6_K if tied else Q.Q4_K)]
    n_attention = cfg["n_layer"] // cfg["interval"]
    for i in range(cfg["n_layer"]):
        p = f"blk.{i}."
        recurrent = (i + 1) % cfg["interval"] != 0
        heavy = Q.Q6_K if more_bits(i, cfg["n_layer"]) else Q.Q4_K
        out += [(p + "attn_norm.weight", [e], Q.F32), (p + "post_attention_norm.weight", [e], Q.F32)]
        if recurrent:
            out += [(p + "attn_qkv.weight", [e, conv], Q.Q5_K), (p + "attn_gate.weight", [e, inner], Q.Q4_K),
                    (p + "ssm_conv1d.weight", [d["kernel"], conv], Q.F32),
                    (p + "ssm_dt.bias", [d["v_heads"]], Q.F32), (p + "ssm_a", [d["v_heads"]], Q.F32),
                    (p + "ssm_beta.weight", [e, d["v_heads"]], Q.Q4_K),
                    (p + "ssm_alpha.weight", [e, d["v_heads"]], Q.Q4_K),
                    (p + "ssm_norm.weight", [d["head_dim"]], Q.F32),
                    (p + "ssm_out.weight", [inner, e], Q.Q4_K)]
        else:
            kv = cfg["n_head_kv"] * hd
            v_kind = Q.Q6_K if more_bits(i // cfg["interval"], n_attention) else Q.Q4_K
            out += [(p + "attn_q.weight", [e, 2 * cfg["n_head"] * hd], Q.Q4_K),
                    (p + "attn_k.weight", [e, kv], Q.Q4_K), (p + "attn_v.weight", [e, kv], v_kind),
                    (p + "attn_output.weight", [cfg["n_head"] * hd, e], Q.Q4_K),
                    (p + "attn_q_norm.weight", [hd], Q.F32), (p + "attn_k_norm.weight", [hd], Q.F32)]
        if moe:
            n, f, fs = moe["count"], moe["ff"], moe["shared_ff"]
            out += [(p + "ffn_gate_inp.weight", [e, n], Q.F32),
                    (p + "ffn_gate_exps.weight", [e, f, n], Q.Q4_K), (p + "ffn_up_exps.weight", [e, f, n], Q.Q4_K),
                    (p + "ffn_down_exps.weight", [f, e, n], heavy),
                    (p + "ffn_gate_shexp.weight", [e, fs], Q.Q4_K), (p + "ffn_up_shexp.weight", [e, fs], Q.Q4_K),
                    (p + "ffn_down_shexp.weight", [fs, e], heavy),
                    (p + "ffn_gate_inp_shexp.weight", [e], Q.F32)]
        else:
            f = cfg["n_ff"]
            out += [(p + "ffn_gate.weight", [e, f], Q.Q4_K), (p + "ffn_up.weight", [e, f], Q.Q4_K),
                    (p + "ffn_down.weight", [f, e], heavy)]
    out += [("output_norm.weight", [e], Q.F32)]
    if not tied:
        out += [("output.weight", [e, v], Q.Q6_K)]
    return out


def add_hybrid_keys(writer: gguf.GGUFWriter, cfg: dict) -> None:
    """The keys llama.cpp's converter writes for qwen35 / qwen35moe (no MTP block)."""
    arch, d = cfg["arch"], cfg["delta"]
    writer.add_uint32(f"{arch}.attention.key_length", cfg["head_dim"])
    writer.add_uint32(f"{arch}.attention.value_length", cfg["head_dim"])
    writer.add_uint32(f"{arch}.rope.dimension_count", cfg["n_rot"])
    writer.add_array(f"{arch}.rope.dimension_sections", cfg["sections"])
    writer.add_uint32(f"{arch}.ssm.conv_kernel", d["kernel"])
    writer.add_uint32(f"{arch}.ssm.state_size", d["head_dim"])
    writer.add_uint32(f"{arch}.ssm.inner_size", d["v_heads"] * d["head_dim"])
    writer.add_uint32(f"{arch}.ssm.time_step_rank", d["v_heads"])
    writer.add_uint32(f"{arch}.ssm.group_count", d["k_heads"])
    writer.add_uint32(f"{arch}.full_attention_interval", cfg["interval"])
    if moe := cfg.get("experts"):
        writer.add_uint32(f"{arch}.expert_count", moe["count"])
        writer.add_uint32(f"{arch}.expert_used_count", moe["used"])
        writer.add_uint32(f"{arch}.expert_feed_forward_length", moe["ff"])
        writer.add_uint32(f"{arch}.expert_shared_feed_forward_length", moe["shared_ff"])


def nbytes(shape: list[int], kind: Q) -> int:
    block, size = gguf.GGML_QUANT_SIZES[kind]
    elements = int(np.prod(shape))
    assert shape[0] % block == 0, (shape, kind)
    return elements // block * size


def copy_tokenizer(writer: gguf.GGUFWriter, vocab_file: pathlib.Path, n_vocab: int) -> None:
    reader = gguf.GGUFReader(vocab_file)
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                values = [bytes(field.parts[i]).decode() for i in field.data]
            else:
                values = [field.parts[i].tolist()[0] for i in field.data]
            # The converter pads the token list to the embedding's rows.
            if field.name == "tokenizer.ggml.tokens":
                values += [f"[PAD{i}]" for i in range(len(values), n_vocab)]
            elif field.name == "tokenizer.ggml.token_type":
                values += [int(gguf.TokenType.UNUSED)] * (n_vocab - len(values))
            elif field.name == "tokenizer.ggml.scores":
                values += [0.0] * (n_vocab - len(values))
            writer.add_key_value(field.name, values, kind, sub_type=sub)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_key_value(field.name, bytes(field.parts[-1]).decode(), kind)
        else:
            writer.add_key_value(field.name, field.parts[-1].tolist()[0], kind)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("layout", choices=sorted(LAYOUTS))
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--vocab-dir", type=pathlib.Path, default=CACHE / "vocab")
    args = ap.parse_args()
    cfg = LAYOUTS[args.layout]
    vocab_file = args.vocab_dir / f"ggml-vocab-{cfg['vocab']}.gguf"
    if not vocab_file.exists():
        sys.exit(f"{vocab_file}: missing (run ci/fetch_test_data.sh)")

    arch = cfg["arch"]
    writer = gguf.GGUFWriter(str(args.out), arch)
    writer.add_name(f"{args.layout} (shapes only, random weights)")
    writer.add_file_type(cfg["ftype"])
    writer.add_uint32(f"{arch}.block_count", cfg["n_layer"])
    writer.add_uint32(f"{arch}.context_length", cfg["context"])
    writer.add_uint32(f"{arch}.embedding_length", cfg["n_embd"])
    writer.add_uint32(f"{arch}.feed_forward_length", cfg["n_ff"])
    writer.add_uint32(f"{arch}.attention.head_count", cfg["n_head"])
    writer.add_uint32(f"{arch}.attention.head_count_kv", cfg["n_head_kv"])
    writer.add_float32(f"{arch}.rope.freq_base", cfg["rope_base"])
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg["eps"])
    hybrid = "delta" in cfg
    if hybrid:
        add_hybrid_keys(writer, cfg)
    copy_tokenizer(writer, vocab_file, cfg["n_vocab"])
    total = 0
    for name, shape, kind in (hybrid_tensors(cfg) if hybrid else tensors(cfg)):
        size = nbytes(shape, kind)
        writer.add_tensor_info(name, list(reversed(shape)), np.dtype(np.float32), size, raw_dtype=kind)
        total += size
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    # The data section starts at the next multiple of the alignment.
    size = args.out.stat().st_size
    with open(args.out, "ab") as f:
        f.write(b"\0" * (-size % gguf.GGUF_DEFAULT_ALIGNMENT))
    print(f"{args.out}: {args.layout} header, tensor data {total / 1e9:.2f} GB to fill")
    return 0


if __name__ == "__main__":
    sys.exit(main())
