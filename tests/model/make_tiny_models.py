#!/usr/bin/env python3
"""Tiny random-weight GGUF models, one per architecture, for llama.cpp parity.

    python3 tests/model/make_tiny_models.py [OUT_DIR]   (default ~/.cache/ferrox/tiny-models)

Weights are Gaussian with a fan-in spread (1/sqrt(cols)), norms near 1;
attention weights are Q8_0, FFN weights Q4_0 (gguf.quants.quantize), norms,
biases and the MoE router F32. The tokenizer metadata is copied from
llama.cpp's vocab-only GGUFs (~/.cache/ferrox/vocab or $FERROX_VOCAB_DIR,
ci/fetch_test_data.sh), so llama.cpp loads the result like a real model.
Deterministic: the same seed gives the same files. Which files, with which options and
seeds, is tests/model/tiny_catalogue.py; this script writes them.

Which tensors a file holds, their names and shapes, come from the built
ferrox (`ferrox architectures --json`: the rules weight binding reads), so
the generator cannot hold a tensor list of its own that drifts from the
engine's; this script only chooses the values, the quantization, and which
optional tensors a variant carries. ferrox is $FERROX_BIN, else the newest
build/*/bin/ferrox of this checkout.

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
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import gguf_in_memory  # noqa: E402

from tiny_catalogue import (FAMILIES, G_EMBD, G_FF, G_HEAD, G_HEAD_DIM, G_HEAD_KV, G_LAYER, G_WINDOW, HEAD_DIM,
                            MODELS, N_CTX, N_EMBD, N_EXPERT, N_EXPERT_USED, N_FF, N_FF_EXP, N_HEAD, N_HEAD_KV,
                            N_LAYER)
# The families by name, for the tests that make a variant of one entry.
from tiny_catalogue import (BERT, BERT_RERANK, DEEPSEEK, DEEPSEEK_KVB, EMBEDDING, GEMMA4, GEMMA4_MOE, HYBRID,  # noqa: F401
                            HYBRID_MOE, MAMBA2, REARRANGED, SHAPED, SHORTCONV)

REPO = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("FERROX_CACHE_DIR", pathlib.Path.home() / ".cache" / "ferrox"))
VOCAB_DIR = pathlib.Path(os.environ.get("FERROX_VOCAB_DIR", CACHE / "vocab"))


def llama3_rope_freqs(n_rot: int, base: float, factor: float, low_freq_factor: float, high_freq_factor: float,
                      original_context: int) -> np.ndarray:
    """Llama 3.1's per-pair frequency divisors (its rope_scaling "llama3" recipe, as
    written into `rope_freqs.weight`): wavelengths beyond original_context /
    low_freq_factor are divided by `factor`, those below original_context /
    high_freq_factor kept, a smooth blend between."""
    inv_freq = base ** (-np.arange(0, n_rot, 2, dtype=np.float64) / n_rot)
    wavelen = 2 * np.pi / inv_freq
    low, high = original_context / low_freq_factor, original_context / high_freq_factor
    smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    divisor = np.where(wavelen < high, 1.0, np.where(wavelen > low, factor, 1.0 / ((1 - smooth) / factor + smooth)))
    return divisor.astype(np.float32)


def layer_dims(dims: dict, opt: dict, il: int | None) -> dict:
    """Layer `il`'s extents: gemma4's global layers (full_head) have a head size and KV head
    count of their own, and its layers may list their FFN widths (ff_layers)."""
    if il is None:
        return dims
    out = dict(dims)
    full = opt.get("full_head")
    if full and not opt["swa_layers"][il]:
        hd, kv = full["head_dim"], full["kv_heads"]
        out.update({"q_dim": N_HEAD * hd, "k_dim": kv * hd, "v_dim": kv * hd, "o_dim": N_HEAD * hd,
                    "head_dim_k": hd})
    if "ff_layers" in opt:
        out["n_ff"] = opt["ff_layers"][il]
    return out


@functools.lru_cache(maxsize=None)  # a vocabulary file's parse takes seconds; many models share one
def tokenizer_fields(vocab_path: pathlib.Path) -> tuple[tuple[str, object, gguf.GGUFValueType, object], ...]:
    """The vocabulary file's tokenizer.* keys: (key, value, type, array element type)."""
    reader = gguf_in_memory.read(vocab_path)
    fields = []
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        fields.append((key, field.contents(), vtype, sub))
    return tuple(fields)


def copy_tokenizer(writer: gguf.GGUFWriter, vocab_path: pathlib.Path) -> int:
    n_vocab = 0
    for key, value, vtype, sub in tokenizer_fields(vocab_path):
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


def ferrox_exe() -> str:
    if os.environ.get("FERROX_BIN"):
        return os.environ["FERROX_BIN"]
    built = sorted(REPO.glob("build/*/bin/ferrox"), key=lambda p: p.stat().st_mtime)
    if not built:
        sys.exit("make_tiny_models: no ferrox to read the tensor rules from: build it "
                 "(cmake --preset release && cmake --build --preset release) or set FERROX_BIN")
    return str(built[-1])


@functools.lru_cache(maxsize=None)
def tensor_rules(arch: str) -> tuple:
    """The tensors an `arch` file may hold, as `ferrox architectures --json` lists them."""
    out = subprocess.run([ferrox_exe(), "architectures", "--json", arch], check=True, capture_output=True,
                         text=True).stdout
    (entry,) = json.loads(out)["architectures"]
    return tuple(entry["tensors"])


def holds(rule: dict, opt: dict, il: int | None = None) -> bool:
    """Whether this file carries the rule's tensor (at layer `il`): every required one (biases
    only where the variant has them), the optional ones its options ask for."""
    name = rule["name"]
    if name in opt.get("drop", ()):  # a bad-input test's file without this tensor
        return False
    if "kinds" in opt and rule["when"] in ("attention_layer", "recurrent_layer", "ffn_layer"):
        # The Mamba-2 hybrids' layers: R a Mamba-2 block, G attention, F an FFN alone.
        kind = opt["kinds"][il] if il is not None else "G"
        if kind != {"attention_layer": "G", "recurrent_layer": "R", "ffn_layer": "F"}[rule["when"]]:
            return False
        if kind != "G":
            return True
    elif rule["when"] in ("attention_layer", "recurrent_layer"):  # qwen35's and lfm2's layer kinds
        d = opt["delta"] if "delta" in opt else opt["shortconv"]
        n_run = opt.get("n_layer", N_LAYER) - opt.get("nextn", 0)  # NextN blocks attend
        recurrent = il is not None and il < n_run and (d["layers"][il] if "layers" in d else (il + 1) % d["interval"] != 0)
        if recurrent != (rule["when"] == "recurrent_layer"):
            return False
        if recurrent:
            return True
    # llama4's interleave: experts on every moe_step-th layer, a dense FFN between.
    step = opt.get("llama4", {}).get("moe_step", 1)
    expert_layer = bool(opt.get("moe")) and (il is None or (il >= opt.get("dense_lead", 0) and (il + 1) % step == 0))
    if "F" in opt.get("kinds", "") and il is not None and opt["kinds"][il] != "F":
        expert_layer = False  # nemotron_h_moe: experts on the FFN-only layers alone
    if name == "blk.N.exp_probs_b.bias" and opt.get("no_selection_bias"):
        return False
    if rule["when"] == "qkv_biases":
        return bool(opt.get("bias"))
    if rule["when"] == "nextn":
        if il is None or il < opt.get("n_layer", N_LAYER) - opt.get("nextn", 0):
            return False
        return rule["use"] == "required" or name == "blk.N.nextn.shared_head_norm.weight"
    if rule["when"] == "per_layer_embd":
        return bool(opt.get("per_layer"))
    if rule["when"] in ("q_low_rank", "q_direct"):
        return bool(opt["mla"].get("q_lora")) == (rule["when"] == "q_low_rank")
    if rule["when"] in ("mla_split", "mla_kv_b"):
        return bool(opt["mla"].get("kv_b")) == (rule["when"] == "mla_kv_b")
    if rule["when"] in ("dense", "experts"):
        if expert_layer != (rule["when"] == "experts"):
            return False
        if "fused_into" in rule or name == "blk.N.ffn_gate_up_exps.weight":  # gemma4's fused experts
            return bool(opt.get("fused_experts")) == ("fused_into" not in rule)
        if rule["use"] == "optional" and name != "blk.N.exp_probs_b.bias":
            return name == "blk.N.ffn_down_exps.scale" and bool(opt.get("down_scales"))
        return True
    if rule["when"] == "shared_experts":
        return expert_layer and (opt.get("glm", {}).get("expert_shared_count", 0) > 0 or "shexp" in opt
                                 or "llama4" in opt)
    if "fused_into" in rule:
        return not opt.get("fused")
    if rule["use"] == "required":
        return True
    longrope = opt.get("rope_scaling", {}).get("type") == "longrope" or "longrope_factors" in opt
    return {"output.weight": not opt["tied"], "rope_freqs.weight": "rope_freqs" in opt,
            "rope_factors_short.weight": longrope, "rope_factors_long.weight": longrope,
            "blk.N.attn_qkv.weight": bool(opt.get("fused")),
            "blk.N.attn_q_norm.weight": bool(opt.get("qk_norm")),
            "blk.N.attn_k_norm.weight": bool(opt.get("qk_norm")),
            "blk.N.attn_v.weight": True, "blk.N.layer_output_scale.weight": True,
            "dense_2.weight": "dense" in opt, "dense_3.weight": "dense" in opt,
            # BERT's optional tables and biases: all there (no_types draws token_types, unwritten).
            "token_types.weight": bool(opt.get("encoder")),
            # A reranker's head: a sequence classifier's (bert), all four.
            "cls.weight": "rank_head" in opt, "cls.bias": "rank_head" in opt,
            "cls.output.weight": "rank_head" in opt, "cls.output.bias": "rank_head" in opt,
            "blk.N.attn_output.bias": bool(opt.get("encoder")),
            "blk.N.ffn_up.bias": bool(opt.get("encoder")), "blk.N.ffn_down.bias": bool(opt.get("encoder"))}.get(name, False)


def write_tensors(w: gguf.GGUFWriter, arch: str, n_layer: int, dims: dict, opt: dict, values) -> None:
    """Every tensor the rules give this file, the model's then each layer's, in the rules' order
    (the order the random values are drawn in)."""
    rules = tensor_rules(arch)
    for rule in (r for r in rules if r["scope"] == "model" and holds(r, opt)):
        values.add(w, rule["name"], rule, dims, None)
    # A trunk-only file (llama.cpp loads one) leaves its NextN blocks out.
    for il in range(n_layer - (opt.get("nextn", 0) if opt.get("trunk_only") else 0)):
        for rule in (r for r in rules if r["scope"] == "layer" and holds(r, opt, il)):
            # gemma4's global layers without attn_v (K stands for V there).
            if rule["name"] == "blk.N.attn_v.weight" and rule["use"] == "optional" \
                    and opt.get("swa_layers") and not opt["swa_layers"][il]:
                continue
            values.add(w, rule["name"].replace("blk.N.", f"blk.{il}."), rule, layer_dims(dims, opt, il), il)


class Values:
    """The generic tiny models' values: Gaussian matrices with a fan-in spread, attention and
    embeddings Q8_0, FFNs Q4_0 (gpt-oss's experts MXFP4), the router F32, norms near 1."""

    def __init__(self, rng, opt: dict):
        self.rng, self.opt = rng, opt

    def rows(self, rule: dict, dims: dict) -> list[int]:
        if "parts" in rule:
            return [dims[p["rows"]] for p in rule["parts"]]
        return [dims[rule["shape"][1]]]

    def add(self, w: gguf.GGUFWriter, name: str, rule: dict, dims: dict, il: int | None) -> None:
        rng, short = self.rng, name.split(".", 2)[-1] if il is not None else name
        if rule["form"] == "rows" and dims[rule["shape"][1]] != dims["n_vocab"]:
            # BERT's token type and position rows, f32 (drawn even where no_types leaves them out).
            table = (0.5 * rng.standard_normal((dims[rule["shape"][1]], dims[rule["shape"][0]]))).astype(np.float32)
            if not (self.opt.get("no_types") and name == "token_types.weight"):
                w.add_tensor(name, table)
        elif rule["form"] == "rows":
            add_quantized(w, name, self.embeddings(dims, dims[rule["shape"][0]]), Q.Q8_0)
        elif rule["form"] == "matrix":
            cols = dims[rule["shape"][0]]
            data = np.concatenate([matrix(rng, rows, cols) for rows in self.rows(rule, dims)])
            if short == "attn_q.weight" and self.opt.get("fault") == "gate":  # rows [q | gate] per head
                data.reshape(N_HEAD, 2, -1, cols)[:, 1] = 0.0
            if short == "ssm_ba.weight" and self.opt.get("fault") == "ba_order":
                d = self.opt["delta"]
                vh, per_key = d["v_heads"], d["v_heads"] // d["k_heads"]
                faulty = np.empty_like(data)
                for h in range(vh):  # key head g's rows: its betas, then its alphas
                    g, j = divmod(h, per_key)
                    faulty[2 * g * per_key + j], faulty[2 * g * per_key + per_key + j] = data[h], data[vh + h]
                data = faulty
            if short == "attn_kv_b.weight" and self.opt.get("fault") == "kv_b_order":
                m = self.opt["mla"]  # per head [unrotated key | value] rows swapped round
                per_head = data.reshape(N_HEAD, m["nope"] + m["v"], cols)
                data = np.concatenate([per_head[:, m["nope"]:], per_head[:, :m["nope"]]], axis=1).reshape(-1, cols)
            nope_gain = self.opt.get("llama4", {}).get("nope_q_gain")
            if short == "attn_q.weight" and nope_gain and (il + 1) % 4 == 0:  # llama4's layer without RoPE
                data = data * nope_gain
            if short == "ffn_down.weight" and self.opt.get("fault") == "ffn_off":  # nemotron_h's FFN layers
                data[:] = 0.0
            if short == "ffn_gate_inp.weight":
                w.add_tensor(name, data)
            elif short == "ffn_gate_inp_shexp.weight":  # a vector of n_embd in the files, F32
                w.add_tensor(name, data.reshape(-1) * (0.0 if self.opt.get("fault") == "shexp_gate" else 1.0))
            else:
                if short == "ffn_down_shexp.weight" and self.opt.get("fault") == "no_shexp":
                    data = np.zeros_like(data)  # drawn all the same: the other values stay
                self.add_matrix(w, name, short, data, il)
        elif rule["form"] == "experts":  # a fused stack's rows are its parts' (gate, then up)
            cols, rows, n = dims[rule["shape"][0]], sum(self.rows(rule, dims)), dims[rule["shape"][2]]
            stack = np.stack([matrix(rng, rows, cols) for _ in range(n)])
            add_quantized(w, name, stack, Q.MXFP4 if self.opt.get("oai") else Q.Q4_0)
        else:
            values = self.vector(name, short, [dims[d] for d in rule["shape"]])
            if not (self.opt.get("no_dense") and short.startswith("dense_")) \
                    and not (self.opt.get("no_cls_bias") and name == "cls.bias"):  # drawn all the same
                w.add_tensor(name, values)

    def embeddings(self, dims: dict, cols: int) -> np.ndarray:
        return (0.5 * self.rng.standard_normal((dims["n_vocab"], cols))).astype(np.float32)

    def add_matrix(self, w, name: str, short: str, data: np.ndarray, il: int | None) -> None:
        add_quantized(w, name, data, Q.Q4_0 if short.startswith("ffn_") else Q.Q8_0)

    def vector(self, name: str, short: str, shape: list[int]) -> np.ndarray:
        rng, n = self.rng, shape[0]
        if short == "rope_freqs.weight" and "proportional_rope" in self.opt:
            # gemma4's proportional RoPE: the first pairs rotate, the rest are held still.
            k = self.opt["proportional_rope"]
            return np.array([1.0] * k + [1e30] * (n - k), dtype=np.float32)
        if short == "layer_output_scale.weight":
            return rng.uniform(0.3, 1.2, size=1).astype(np.float32)
        if short == "ffn_gate_inp.scale":
            scale = rng.uniform(0.2, 3.0, size=n).astype(np.float32)
            return np.ones_like(scale) if self.opt.get("fault") == "router_scale" else scale
        if short == "ffn_down_exps.scale":
            return rng.uniform(0.5, 2.0, size=n).astype(np.float32)
        if short == "rope_freqs.weight":
            rf = self.opt["rope_freqs"]
            return llama3_rope_freqs(2 * n, self.opt["rope_base"], rf["factor"], rf["low"], rf["high"], rf["orig"])
        if short.startswith("rope_factors_"):
            # Phi-3's shape of factors: near 1 for the fast pairs, growing for the slow ones.
            ramp = np.linspace(0.0, 1.0, n)
            return (1.0 + (0.5 if short == "rope_factors_short.weight" else 7.0) * ramp ** 2).astype(np.float32)
        if short in ("dense_2.weight", "dense_3.weight", "cls.weight", "cls.output.weight"):
            return matrix(rng, shape[1], shape[0])  # GGUF [cols, rows]; f32 (the heads are small)
        if short == "cls.bias":  # large enough that a pass without it scores visibly apart
            return (0.5 * rng.standard_normal(n)).astype(np.float32)
        if short in ("ssm_conv1d.weight", "shortconv.conv.weight"):  # [conv_dim][kernel]
            taps = (0.5 * rng.standard_normal((shape[1], shape[0]))).astype(np.float32)
            return np.ascontiguousarray(taps[:, ::-1]) if self.opt.get("fault") == "conv_taps" else taps
        if short == "ssm_a":  # -exp(A_log): every decay exp(softplus(.) x ssm_a) in (0, 1)
            return -rng.uniform(0.2, 1.5, size=n).astype(np.float32)
        if short == "ssm_dt.bias":
            return rng.uniform(-1.0, 1.0, size=n).astype(np.float32)
        if short == "attn_sinks.weight":
            return rng.standard_normal(n).astype(np.float32)
        if short == "exp_probs_b.bias":  # large enough to change which experts are chosen
            return (0.3 * rng.standard_normal(n)).astype(np.float32)
        if short == "ffn_gate_inp.bias":
            return (0.5 * rng.standard_normal(n)).astype(np.float32)
        if short.endswith("_exps.bias"):  # [n_expert][rows]; one gate/up row in eight at +-9
            bias = 0.1 * rng.standard_normal((shape[1], n))
            if short != "ffn_down_exps.bias":
                bias[:, ::8] = 9.0 * rng.choice([-1.0, 1.0], size=(shape[1], n // 8 + (n % 8 > 0)))
            return bias.astype(np.float32)
        if short.endswith(".bias"):
            return (0.1 * rng.standard_normal(n)).astype(np.float32)
        return self.norm(short, n)

    def norm(self, short: str, n: int) -> np.ndarray:
        return norm(self.rng, n)


class LowbitValues(Values):
    """tiny-llama-lowbit: every matrix in a kind added after MXFP4, encoded by llama.cpp's own
    ggml_quantize_chunk (gguf-py cannot encode Q1_0): NVFP4 (64-weight blocks) and Q1_0 (128)
    where rows are N_EMBD = 128 long, TQ2_0 (layer 0) and TQ1_0 (layer 1) on ffn_down, whose
    256 columns are one ternary block. Q1_0 keeps only signs, so it takes the matrices whose
    error matters least to the logits (attn_v, attn_output)."""

    KINDS = {"attn_q.weight": Q.NVFP4, "attn_k.weight": Q.NVFP4, "attn_v.weight": Q.Q1_0,
             "attn_output.weight": Q.Q1_0, "ffn_gate.weight": Q.NVFP4, "ffn_up.weight": Q.NVFP4,
             "output.weight": Q.NVFP4}

    def add_matrix(self, w, name: str, short: str, data: np.ndarray, il: int | None) -> None:
        if short == "ffn_down.weight":
            add_kquant(w, name, data, Q.TQ2_0 if il == 0 else Q.TQ1_0)
        else:
            add_kquant(w, name, data, self.KINDS[short])


class GemmaValues(Values):
    """tiny-gemma3's values (see the module's text): the real 270M file's type mix, log-normal
    norms, embeddings ~1/sqrt(n_embd)."""

    QUANT = {"attn_q.weight": Q.Q5_0, "attn_k.weight": Q.Q5_0, "ffn_gate.weight": Q.Q5_0, "ffn_up.weight": Q.Q5_0}
    NORMS = {"output_norm.weight": (4.0, 0.8), "attn_norm.weight": (3.0, 0.6), "ffn_norm.weight": (3.0, 0.6),
             "post_attention_norm.weight": (0.5, 1.0), "post_ffw_norm.weight": (0.5, 1.0)}

    def __init__(self, rng):
        super().__init__(rng, {})

    def embeddings(self, dims: dict, cols: int) -> np.ndarray:
        return matrix(self.rng, dims["n_vocab"], cols)

    def add_matrix(self, w, name: str, short: str, data: np.ndarray, il: int | None) -> None:
        even = il is not None and il % 2 == 0
        if short == "attn_output.weight":
            add_kquant(w, name, data, Q.Q4_K)
        elif short == "ffn_down.weight":
            add_kquant(w, name, data, Q.Q6_K if even else Q.Q4_K)
        else:
            add_quantized(w, name, data, self.QUANT.get(short, Q.Q8_0 if even or short != "attn_v.weight" else Q.Q5_0))

    def norm(self, short: str, n: int) -> np.ndarray:
        if short in ("attn_q_norm.weight", "attn_k_norm.weight"):
            return (1.0 + 0.8 * self.rng.standard_normal(n)).astype(np.float32)
        return gemma_norm(self.rng, n, *self.NORMS[short])


def gemma_norm(rng, n: int, scale: float, sigma: float) -> np.ndarray:
    """Log-normal: positive, mostly near `scale`, a tail to several times it (as Gemma's)."""
    return (scale * np.exp(sigma * rng.standard_normal(n))).astype(np.float32)


def make_gemma3(out_dir: pathlib.Path, seed: int, name: str = "gemma3", n_layer: int = G_LAYER,
                n_rot: int = 0) -> pathlib.Path:
    rng = np.random.default_rng(seed)
    path = out_dir / f"tiny-{name}.gguf"
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_name(f"tiny random {name}")
    n_vocab = copy_tokenizer(w, VOCAB_DIR / f"ggml-vocab-{MODELS['gemma3'][0]}.gguf")
    w.add_context_length(N_CTX)
    w.add_embedding_length(G_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(G_FF)
    w.add_head_count(G_HEAD)
    w.add_head_count_kv(G_HEAD_KV)
    w.add_key_length(G_HEAD_DIM)
    w.add_value_length(G_HEAD_DIM)
    w.add_rope_freq_base(1e6)  # global layers; local ones use the architecture's 10000
    if n_rot:
        w.add_rope_dimension_count(n_rot)
    w.add_sliding_window(G_WINDOW)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)

    dims = {"n_embd": G_EMBD, "n_vocab": n_vocab, "q_dim": G_HEAD * G_HEAD_DIM, "k_dim": G_HEAD_KV * G_HEAD_DIM,
            "v_dim": G_HEAD_KV * G_HEAD_DIM, "o_dim": G_HEAD * G_HEAD_DIM, "head_dim_k": G_HEAD_DIM,
            "n_head": G_HEAD, "n_ff": G_FF, "rope_pairs": (n_rot or G_HEAD_DIM) // 2}
    write_tensors(w, "gemma3", n_layer, dims, {"tied": True}, GemmaValues(rng))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


class Mamba2Values(Values):
    """A Mamba-2 layer's values: ssm_a and ssm_d [1, heads] and ssm_norm [groups, inner / groups]
    as its converter shapes them; -exp(A_log) in [-1.5, -0.2], D in [0.5, 1.5], dt biases in
    [-1, 1] (so each decay exp(softplus(dt + bias) x ssm_a) lies in (0, 1))."""

    def vector(self, name: str, short: str, shape: list[int]) -> np.ndarray:
        rng = self.rng
        if short == "ssm_a":
            return -rng.uniform(0.2, 1.5, size=(shape[1], 1)).astype(np.float32)
        if short == "ssm_d":
            d = rng.uniform(0.5, 1.5, size=(shape[1], 1)).astype(np.float32)
            return np.zeros_like(d) if self.opt.get("fault") == "no_d" else d
        if short == "ssm_norm.weight":
            return norm(rng, shape[0] * shape[1]).reshape(shape[1], shape[0])
        if short == "ssm_conv1d.bias":
            return (0.3 * rng.standard_normal(shape[0])).astype(np.float32)
        return super().vector(name, short, shape)


def make_mamba2(out_dir: pathlib.Path, seed: int, name: str, vocab_name: str, opt: dict) -> pathlib.Path:
    """A mamba2 file with the keys convert_hf_to_gguf.py's Mamba2Model writes."""
    rng = np.random.default_rng(seed)
    path = out_dir / f"tiny-{name}.gguf"
    arch, m, n_layer = "mamba2", opt["mamba2"], opt["n_layer"]
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny random {name}")
    n_vocab = copy_tokenizer(w, VOCAB_DIR / f"ggml-vocab-{vocab_name}.gguf")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_block_count(n_layer)
    w.add_ssm_conv_kernel(m["kernel"])
    w.add_ssm_inner_size(m["inner"])
    w.add_ssm_state_size(m["state"])
    w.add_ssm_time_step_rank(m["heads"])
    w.add_ssm_group_count(m["groups"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    conv_dim = m["inner"] + 2 * m["groups"] * m["state"]
    dims = {"1": 1, "n_embd": N_EMBD, "n_vocab": n_vocab, "ssm_conv_kernel": m["kernel"],
            "ssm_conv_dim": conv_dim, "ssm_inner": m["inner"], "ssm_v_heads": m["heads"],
            "ssm_groups": m["groups"], "ssm_group_dim": m["inner"] // m["groups"]}
    write_tensors(w, arch, n_layer, dims, opt, Mamba2Values(rng, opt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def add_ugm_xlmr_tokenizer(writer: gguf.GGUFWriter, seed: int) -> int:
    """A SentencePiece unigram vocabulary trained here (ugm_vocab.py; the seed its text's)
    with XLM-RoBERTa's ids and the flags its converter writes (bge-m3, bge-reranker-v2-m3):
    <s>=0 <pad>=1 </s>=2 <unk>=3, BOS and EOS added, </s> also the separator, one token type."""
    import ugm_vocab

    n_vocab = ugm_vocab.add_tokenizer(writer, ugm_vocab.train(seed, xlmr_ids=True))
    writer.add_sep_token_id(2)
    writer.add_pad_token_id(1)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_token_type_count(1)
    return n_vocab


def make(arch: str, out_dir: pathlib.Path, seed: int, name: str = "", vocab_name: str = "",
         opt: dict | None = None) -> pathlib.Path:
    name = name or arch
    if arch == "gemma3":
        return make_gemma3(out_dir, seed, name, **(opt or {}))
    if opt is None:
        vocab_name, opt = MODELS[arch]
    rng = np.random.default_rng(seed)
    path = out_dir / f"tiny-{name}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny random {name}")
    if vocab_name == "ugm-xlmr":
        n_vocab = add_ugm_xlmr_tokenizer(w, seed)
    else:
        n_vocab = copy_tokenizer(w, VOCAB_DIR / f"ggml-vocab-{vocab_name}.gguf")
    w.add_context_length(opt.get("n_ctx", N_CTX))
    w.add_embedding_length(N_EMBD)
    n_layer = opt.get("n_layer", N_LAYER)
    w.add_block_count(n_layer)
    w.add_head_count(N_HEAD)
    mla = opt.get("mla")
    if mla and mla.get("kv_b"):  # the older converter's: every head's key and value, no *_mla keys
        w.add_head_count_kv(N_HEAD)
        w.add_key_length(mla["nope"] + mla["rot"])
        w.add_value_length(mla.get("v_key", mla["v"]))  # v_key: a bad-input test's disagreeing key
    elif mla:  # one cached head: [latent | rotated] keys, the latent as values
        w.add_head_count_kv(1)
        w.add_key_length(mla["kv_lora"] + mla["rot"])
        w.add_value_length(mla["kv_lora"])
    if mla:
        w.add_rope_dimension_count(mla["rot"])
        w.add_uint32(f"{arch}.attention.q_lora_rank", mla["q_lora"])
        w.add_uint32(f"{arch}.attention.kv_lora_rank", mla["kv_lora"])
        if not mla.get("kv_b"):
            w.add_uint32(f"{arch}.attention.key_length_mla", mla["nope"] + mla["rot"])
            w.add_uint32(f"{arch}.attention.value_length_mla", mla["v"])
        if not opt.get("moe"):  # llama.cpp requires these two whatever the layers; all dense here
            w.add_uint32(f"{arch}.leading_dense_block_count", n_layer)
            w.add_expert_feed_forward_length(N_FF_EXP)
            w.add_uint32(f"{arch}.expert_shared_count", 1)
    elif "shortconv" in opt:  # lfm2: 0 KV heads marks a short-convolution layer
        w.add_head_count_kv([0 if conv else N_HEAD_KV for conv in opt["shortconv"]["layers"]])
        w.add_uint32(f"{arch}.shortconv.l_cache", opt["shortconv"]["l_cache"])
        w.add_rope_dimension_count(HEAD_DIM)
    elif "kinds" in opt:  # the Mamba-2 hybrids: KV heads on the attention layers alone
        w.add_head_count_kv([N_HEAD_KV if kind == "G" else 0 for kind in opt["kinds"]])
        w.add_key_length(HEAD_DIM)
        w.add_value_length(HEAD_DIM)
        w.add_rope_dimension_count(HEAD_DIM)
    elif "full_head" in opt:  # gemma4: the global layers' heads, the sliding ones' below
        full = opt["full_head"]
        w.add_head_count_kv([N_HEAD_KV if swa else full["kv_heads"] for swa in opt["swa_layers"]])
        w.add_key_length(full["head_dim"])
        w.add_value_length(full["head_dim"])
        w.add_rope_dimension_count(full["head_dim"])
        w.add_rope_dimension_count_swa(HEAD_DIM)
    elif opt.get("learned_pos"):  # BERT: learned positions, no RoPE keys
        w.add_head_count_kv(N_HEAD_KV)
    else:
        w.add_head_count_kv(N_HEAD_KV)
        w.add_key_length(HEAD_DIM)
        w.add_value_length(HEAD_DIM)
        w.add_rope_dimension_count(opt.get("n_rot", HEAD_DIM))
    if not opt.get("learned_pos"):
        w.add_rope_freq_base(opt.get("rope_base", 10000.0 if arch in ("llama", "granite", "smollm3", "phi3", "mistral3", "gemma2")
                                     else 150000.0 if arch == "gpt-oss" else 1e6))
    if "sections" in opt:
        w.add_rope_dimension_sections(opt["sections"])
    if "deepstack" in opt:
        w.add_uint32(f"{arch}.n_deepstack_layers", opt["deepstack"])
    for key, value in opt.get("scales", {}).items():
        w.add_float32(f"{arch}.{key}", value)
    if "rope_scaling" in opt:
        rs = opt["rope_scaling"]
        w.add_string(f"{arch}.rope.scaling.type", rs["type"])
        if "factor" in rs:
            w.add_rope_scaling_factor(rs["factor"])
        w.add_rope_scaling_orig_ctx_len(rs["orig"])
        if "attn_factor" in rs:
            w.add_float32(f"{arch}.rope.scaling.attn_factor", rs["attn_factor"])
        if "log_mul" in rs:
            w.add_float32(f"{arch}.rope.scaling.yarn_log_multiplier", rs["log_mul"])
    if "window" in opt:
        w.add_sliding_window(opt["window"])
    if "swa_pattern" in opt:
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", opt["swa_pattern"])
    if "pooling" in opt:
        w.add_uint32(f"{arch}.pooling_type", opt["pooling"])
    if "rank_head" in opt:  # a reranker's labels, one output each
        w.add_array(f"{arch}.classifier.output_labels", opt["rank_head"]["labels"])
    for key, value in opt.get("tokenizer_flags", {}).items():  # e.g. add_eos_token
        w.add_bool(f"tokenizer.ggml.{key}", value)
    if "dense" in opt:  # the keys stay when the tensors go (no_dense): llama.cpp reads them alone
        for key, v in (("dense_2_feat_in", N_EMBD), ("dense_2_feat_out", opt["dense"]),
                       ("dense_3_feat_in", opt["dense"]), ("dense_3_feat_out", N_EMBD)):
            w.add_uint32(f"{arch}.{key}", v)
    if "softcap" in opt:
        w.add_float32(f"{arch}.attn_logit_softcapping", opt["softcap"][0])
        w.add_float32(f"{arch}.final_logit_softcapping", opt["softcap"][1])
    if "swa_layers" in opt:  # gemma4: the window's layers listed, its per-layer geometry keys
        w.add_sliding_window_pattern(opt["swa_layers"])
        w.add_key_length_swa(HEAD_DIM)
        w.add_value_length_swa(HEAD_DIM)
        w.add_embedding_length_per_layer_input(opt.get("per_layer", 0))
        w.add_shared_kv_layers(opt.get("shared_kv", 0))
        w.add_rope_freq_base_swa(10000.0)
    if "delta" in opt:  # Gated DeltaNet layers (qwen35)
        d = opt["delta"]
        w.add_uint32(f"{arch}.ssm.conv_kernel", d["kernel"])
        w.add_uint32(f"{arch}.ssm.state_size", d["state"])
        w.add_uint32(f"{arch}.ssm.inner_size", d["state"] * d["v_heads"])
        w.add_uint32(f"{arch}.ssm.time_step_rank", d["v_heads"])
        w.add_uint32(f"{arch}.ssm.group_count", d["k_heads"])
        w.add_uint32(f"{arch}.full_attention_interval", d["interval"])
        if "layers" in d:  # one bool per block, NextN blocks included (false)
            w.add_array(f"{arch}.attention.recurrent_layers", d["layers"])
    if "mamba2" in opt:  # Mamba-2 blocks beside attention (granitehybrid, nemotron_h)
        m = opt["mamba2"]
        w.add_ssm_conv_kernel(m["kernel"])
        w.add_ssm_inner_size(m["inner"])
        w.add_ssm_state_size(m["state"])
        w.add_ssm_time_step_rank(m["heads"])
        w.add_ssm_group_count(m["groups"])
    if "rope_finetuned" in opt:  # granitehybrid's switch for RoPE
        w.add_rope_scaling_finetuned(opt["rope_finetuned"])
    if "final_softcap" in opt:
        w.add_final_logit_softcapping(opt["final_softcap"])
    if "temperature_scale" in opt:
        w.add_float32(f"{arch}.attention.temperature_scale", opt["temperature_scale"])
    if "temperature_length" in opt:  # deepseek2's (Mistral Large 3's) temperature length
        w.add_uint32(f"{arch}.attention.temperature_length", opt["temperature_length"])
    if opt.get("encoder"):  # BERT's LayerNorm epsilon, attending both ways (bge's vocabulary
        w.add_layer_norm_eps(1e-12)  # carries tokenizer.ggml.token_type_count, 2)
        w.add_causal_attention(False)
    elif opt.get("norm_eps_only"):  # nemotron_h's converter writes no RMS epsilon
        w.add_layer_norm_eps(1e-5)
    else:
        w.add_layer_norm_rms_eps(1e-6)
    if opt.get("moe") and opt.get("mixtral"):  # each expert feed_forward_length wide
        w.add_expert_count(N_EXPERT)
        w.add_expert_used_count(N_EXPERT_USED)
        w.add_feed_forward_length(N_FF_EXP)
        if "shexp" in opt:  # granitehybrid's optional shared expert
            w.add_uint32(f"{arch}.expert_shared_feed_forward_length", opt["shexp"])
    elif opt.get("moe"):
        w.add_expert_count(opt.get("n_expert", N_EXPERT))
        w.add_expert_used_count(opt.get("n_used", N_EXPERT_USED))
        if "llama4" in opt:
            w.add_uint32(f"{arch}.interleave_moe_layer_step", opt["llama4"]["moe_step"])
        # expert_ff_key: a width the tensors disagree with (a bad-input test's file).
        w.add_expert_feed_forward_length(opt.get("expert_ff_key", N_FF_EXP))
        w.add_feed_forward_length(opt.get("ff_layers", N_FF))  # nemotron_h_moe: one per layer
        if opt.get("dense_lead"):
            w.add_leading_dense_block_count(opt["dense_lead"])
        if opt.get("nextn"):
            w.add_uint32(f"{arch}.nextn_predict_layers", opt["nextn"])
        if "shexp" in opt:
            w.add_uint32(f"{arch}.expert_shared_feed_forward_length", opt["shexp"])
        for key, value in opt.get("glm", {}).items():
            {bool: w.add_bool, int: w.add_uint32, float: w.add_float32}[type(value)](f"{arch}.{key}", value)
    else:
        w.add_feed_forward_length(opt.get("ff_layers", N_FF))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)

    n_rot = opt["full_head"]["head_dim"] if "full_head" in opt else opt.get("n_rot", HEAD_DIM)
    dims = {"1": 1, "n_embd": N_EMBD, "n_vocab": n_vocab, "q_dim": N_HEAD * HEAD_DIM, "k_dim": N_HEAD_KV * HEAD_DIM,
            "v_dim": N_HEAD_KV * HEAD_DIM, "o_dim": N_HEAD * HEAD_DIM, "head_dim_k": HEAD_DIM, "n_head": N_HEAD,
            "n_ff": max(opt.get("ff_layers", [N_FF])), "n_ff_expert": N_FF_EXP, "n_expert": opt.get("n_expert", N_EXPERT), "rope_pairs": n_rot // 2,
            "n_ff_shexp": N_FF_EXP if "llama4" in opt
            else opt.get("shexp", N_FF_EXP * opt.get("glm", {}).get("expert_shared_count", 0)),
            "n_embd+n_embd": 2 * N_EMBD, "n_embd_per_layer": opt.get("per_layer", 0),
            "n_embd_per_layer*n_layer": opt.get("per_layer", 0) * n_layer, "n_dense": opt.get("dense", 0),
            "n_token_types": 1 if vocab_name == "ugm-xlmr" else 2, "n_ctx_train": opt.get("n_ctx", N_CTX),
            "n_cls_out": len(opt["rank_head"]["labels"]) if "rank_head" in opt else 1}
    if mla:
        dims.update({"q_lora": mla["q_lora"], "kv_lora": mla["kv_lora"],
                     "qk_nope": mla["nope"], "head_dim_v_mla": mla["v"],
                     "q_dim_mla": N_HEAD * (mla["nope"] + mla["rot"]), "o_dim_mla": N_HEAD * mla["v"],
                     "rope_pairs": mla["rot"] // 2, "kv_a_mla": mla["kv_lora"] + mla["rot"],
                     "kv_b_mla": N_HEAD * (mla["nope"] + mla["v"])})
    if "delta" in opt:
        d = opt["delta"]
        dims.update({"q_dim_gated": 2 * N_HEAD * HEAD_DIM, "ssm_conv_kernel": d["kernel"],
                     "ssm_conv_dim": 2 * d["k_heads"] * d["state"] + d["state"] * d["v_heads"],
                     "ssm_inner": d["state"] * d["v_heads"], "ssm_v_heads": d["v_heads"],
                     "ssm_head_dim": d["state"]})
    if "shortconv" in opt:
        dims.update({"ssm_conv_kernel": opt["shortconv"]["l_cache"], "ssm_conv_dim": N_EMBD})
    if "mamba2" in opt:
        m = opt["mamba2"]
        dims.update({"ssm_conv_kernel": m["kernel"], "ssm_conv_dim": m["inner"] + 2 * m["groups"] * m["state"],
                     "ssm_inner": m["inner"], "ssm_v_heads": m["heads"], "ssm_groups": m["groups"],
                     "ssm_group_dim": m["inner"] // m["groups"]})
    if "longrope_factors" in opt:
        lf = opt["longrope_factors"]
        w.add_rope_scaling_orig_ctx_len(lf["orig"])
        w.add_float32(f"{arch}.rope.scaling.attn_factor", lf["attn_factor"])
    values = LowbitValues if opt.get("lowbit") else Mamba2Values if "mamba2" in opt else Values
    write_tensors(w, arch, n_layer, dims, opt, values(rng, opt))
    if "extra" in opt:
        w.add_tensor(opt["extra"], (0.1 * rng.standard_normal(N_EMBD)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def main() -> int:
    out_dir = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else CACHE / "tiny-models"
    out_dir.mkdir(parents=True, exist_ok=True)
    for family in FAMILIES:
        for seed, (name, (arch, vocab_name, opt)) in enumerate(family.entries.items(), start=family.first_seed):
            opt = dict(opt)
            seed = opt.pop("seed", seed)
            try:
                if family.maker == "mamba2":
                    print(make_mamba2(out_dir, seed, name, vocab_name, opt))
                else:
                    print(make(arch, out_dir, seed, name, vocab_name, opt))
            except ImportError as e:  # K-quants need llama-cpp-python's libggml
                print(f"WARN: tiny-{name} not made: {e} (ci/llama_cpp.sh installs llama-cpp-python)",
                      file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
