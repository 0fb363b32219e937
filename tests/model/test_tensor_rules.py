"""`ferrox architectures --json` (the tensor rules weight binding reads) against
the `gguf` package's own per-architecture tensor lists (gguf.constants
MODEL_TENSORS / TENSOR_NAMES, the names llama.cpp's converters write), and the
rules' shapes against the tiny models the generator wrote from them.

Every tensor ferrox binds must be one that the architecture's files can hold:
in gguf's list, or one of the few llama.cpp's loader reads beyond it (ALLOWED,
each with where llama.cpp reads it). A misspelt or invented rule fails here.
Tensors gguf lists that ferrox does not bind are listed exactly (UNBOUND): files
holding them are refused naming the tensor.
"""
from __future__ import annotations

import json
import os
import pathlib
import struct
import subprocess
import sys

import pytest

gguf = pytest.importorskip("gguf")
from gguf.constants import MODEL_ARCH_NAMES, MODEL_TENSORS, TENSOR_NAMES  # noqa: E402

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)

TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))

# Read by llama.cpp's loader (vendor/llama.cpp/src/llama-model.cpp) though gguf's
# per-architecture list omits them.
ALLOWED = {
    # create_tensor_qkv: a fused attn_qkv is taken wherever q/k/v are loaded.
    "*": {"blk.{bid}.attn_qkv"},
    # llama_model's rope factors for llama-shaped graphs: LongRoPE's pair
    # with rope.scaling.type = longrope (llama, granite, mistral3), and
    # Llama 3's rope_freqs for granite.
    "llama": {"rope_factors_long", "rope_factors_short"},
    "granite": {"rope_factors_long", "rope_factors_short", "rope_freqs"},
    "mistral3": {"rope_factors_long", "rope_factors_short"},
    # Gemma 2's output projection is tied; a file that stores it is bound. So is
    # lfm2moe's (src/models/lfm2moe.cpp: output, TENSOR_NOT_REQUIRED).
    "gemma2": {"output"},
    "lfm2moe": {"output"},
    # A reranker's head (src/models/qwen3.cpp: cls_out, not required; Qwen3-Reranker's files).
    "qwen3": {"cls.output"},
    # llama.cpp 0.3.36's deepseek2 loader reads GLM-4.7-Flash's NextN block (its
    # load_arch_tensors, i >= n_layer); gguf-py lists it from its 0.3.36 sdist on.
    "deepseek2": {"blk.{bid}.nextn.eh_proj", "blk.{bid}.nextn.embed_tokens", "blk.{bid}.nextn.enorm",
                  "blk.{bid}.nextn.hnorm", "blk.{bid}.nextn.shared_head_head",
                  "blk.{bid}.nextn.shared_head_norm"},
    # llama.cpp 0.3.36's qwen35, qwen35moe and qwen3next loaders read the MTP block's NextN
    # tensors (load_block_mtp); gguf-py lists them from its 0.3.36 sdist on.
    **{arch: {"blk.{bid}.nextn.eh_proj", "blk.{bid}.nextn.embed_tokens", "blk.{bid}.nextn.enorm",
              "blk.{bid}.nextn.hnorm", "blk.{bid}.nextn.shared_head_head",
              "blk.{bid}.nextn.shared_head_norm"} for arch in ("qwen35", "qwen35moe", "qwen3next")},
    # src/models/gemma4.cpp: the router's input scale and the per-expert output scale
    # (tn(..., "scale") of ffn_gate_inp and ffn_down_exps), and the unfused gate/up experts
    # it loads where a file has no ffn_gate_up_exps.
    # bert: no output projection; the rule is ferrox's tied stand-in (token_embd bound as a
    # matrix, which the resident steps' get_rows reads), so a bert file storing one is bound
    # and unused where llama.cpp's bert loader would refuse it.
    "bert": {"output"},
    # nomic-bert: the same stand-in, and q, k and v apart, which create_tensor_qkv takes
    # wherever it takes a fused attn_qkv.
    "nomic-bert": {"output", "blk.{bid}.attn_q", "blk.{bid}.attn_k", "blk.{bid}.attn_v"},
    "gemma4": {"blk.{bid}.ffn_gate_inp.scale", "blk.{bid}.ffn_down_exps.scale", "blk.{bid}.ffn_gate_exps",
               "blk.{bid}.ffn_up_exps"},
}


# Tensors gguf lists for an architecture that ferrox does not bind, so that a file
# holding one is refused naming it. Kept exact, so that binding one more (or one
# fewer) shows here.
MOE = {"blk.{bid}.ffn_gate_inp", "blk.{bid}.ffn_gate_exps", "blk.{bid}.ffn_up_exps", "blk.{bid}.ffn_down_exps"}
UNBOUND = {
    "llama": {"blk.{bid}.attn_rot_embd"},  # old converters' RoPE cache
    "mistral3": MOE | {"blk.{bid}.attn_rot_embd"},
    "smollm3": {"rope_freqs", "blk.{bid}.attn_rot_embd"},
    "qwen2": {"rope_freqs"},
    "qwen3": {"rope_freqs"},
    "qwen3vl": {"rope_freqs"},
    # The unused q/k/v names gguf lists (old converters' attn_kv_b is bound: files without
    # the *_mla keys run un-absorbed).
    "deepseek2": {"rope_freqs", "blk.{bid}.attn_rot_embd", "blk.{bid}.attn_k", "blk.{bid}.attn_v"},
    # LFM2-ColBERT's projection after the pooling (an embedding variant not run).
    "lfm2": {"dense_2"},
    # The converter's optional fused experts (--fuse-gate-up-exps): not bound, refused by name.
    "qwen35moe": {"blk.{bid}.ffn_gate_up_exps"},
    # Old converters' RoPE cache, which llama.cpp's llama4 loader never reads.
    "llama4": {"blk.{bid}.attn_rot_embd"},
    # The final norm gguf lists, which llama.cpp's bert loader never reads.
    "bert": {"output_norm"},
    # nomic-bert: RoPE, no learned positions (llama.cpp's loader never reads position_embd).
    "nomic-bert": {"output_norm", "position_embd"},
    # And older Qwen3-Next conversions' fused ssm_in (q, k, v, z interleaved per key head),
    # which the current converter writes as attn_qkv and attn_gate.
    "qwen3next": {"blk.{bid}.ffn_gate_up_exps", "blk.{bid}.ssm_in"},
    # Nemotron 3 Super's latent expert projections (moe_latent_size, refused by key), and the
    # dense FFN a file with experts never holds (llama.cpp runs every FFN layer as experts).
    "nemotron_h_moe": {"blk.{bid}.ffn_latent_down", "blk.{bid}.ffn_latent_up", "blk.{bid}.ffn_up",
                       "blk.{bid}.ffn_down"},
}


# Rows whose layers do not attend (llama.cpp's mamba2 loader binds no attention tensor).
ATTENTION_FREE = {"mamba2"}


def architectures() -> list[dict]:
    out = subprocess.run([FERROX, "architectures", "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["architectures"]


ARCHS = architectures()
ARCH_BY_NAME = {v: k for k, v in MODEL_ARCH_NAMES.items()}


def stem(name: str) -> str:
    """A rule's name as gguf's TENSOR_NAMES spells it: blk.{bid}., no .weight/.bias."""
    name = name.replace("blk.N.", "blk.{bid}.")
    for suffix in (".weight", ".bias"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_every_architecture_is_one_gguf_knows():
    assert len(ARCHS) >= 14
    for arch in ARCHS:
        assert arch["name"] in ARCH_BY_NAME, arch["name"]


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: a["name"])
def test_bound_tensors_are_ones_the_files_hold(arch):
    known = {TENSOR_NAMES[t] for t in MODEL_TENSORS[ARCH_BY_NAME[arch["name"]]]}
    allowed = known | ALLOWED["*"] | ALLOWED.get(arch["name"], set())
    ours = {stem(r["name"]) for r in arch["tensors"]}
    assert ours <= allowed, f"{arch['name']}: ferrox binds {sorted(ours - allowed)}, which no file holds"
    # Every layer tensor llama.cpp requires of every architecture is bound (mamba2's layers
    # have no attention).
    for required in ("token_embd",) + (() if arch["name"] in ATTENTION_FREE else ("blk.{bid}.attn_output",)):
        assert required in ours
    # The final norm, under the name gguf gives the architecture (lfm2's is token_embd_norm).
    assert ours & {"output_norm", "token_embd_norm"} & known
    names = [r["name"] for r in arch["tensors"]]
    assert len(names) == len(set(names)), f"{arch['name']}: a tensor is listed twice"
    for r in arch["tensors"]:
        assert r["use"] in ("required", "optional"), r
        if "fused_into" in r:
            fused = next(f for f in arch["tensors"] if f["name"] == r["fused_into"])
            assert r["name"] in [p["name"] for p in fused["parts"]], (r, fused)
    assert known - ours == UNBOUND.get(arch["name"], set()), f"{arch['name']}: update UNBOUND"


def read_header(path: pathlib.Path) -> tuple[dict, dict[str, list[int]]]:
    """A GGUF file's scalar keys and its tensors' shapes. gguf.GGUFReader reads the same but
    builds an object per vocabulary entry (7 s per 151k-token file); this skips the arrays."""
    data = path.read_bytes()
    pos = 0

    def take(fmt: str):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string() -> str:
        n = take("Q")
        nonlocal pos
        pos += n
        return data[pos - n:pos].decode("utf-8", "replace")

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(vtype: int):
        if vtype == 8:
            return string()
        if vtype == 9:
            sub, n = take("I"), take("Q")
            items = [value(sub) for _ in range(n)] if sub in (8, 9) else None
            if items is None:
                nonlocal pos
                if n <= 1024:  # one value per layer (gemma4); vocabulary-sized ones are skipped
                    items = list(struct.unpack_from(f"<{n}{scalar[sub]}", data, pos))
                pos += n * struct.calcsize("<" + scalar[sub])
            return items
        return take(scalar[vtype])

    assert data[:4] == b"GGUF", path
    pos = 4
    _, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    keys = {}
    for _ in range(n_kv):
        key = string()
        keys[key] = value(take("I"))
    shapes = {}
    for _ in range(n_tensors):
        name = string()
        n_dims = take("I")
        shapes[name] = [take("Q") for _ in range(n_dims)]
        take("I"), take("Q")  # type, offset
    return keys, shapes


def dims_of(keys: dict, shapes: dict, il: int = 0) -> dict[str, int]:
    """The extents `ferrox architectures` names, from a file's own metadata, at layer `il`
    (gemma4's keys list KV heads and FFN widths per layer; its sliding layers have their own
    head size)."""
    arch = keys["general.architecture"]

    def key(k, default=None):
        v = keys.get(f"{arch}.{k}", default)
        return v[il] if isinstance(v, list) and k != "attention.sliding_window_pattern" else v

    n_head, n_kv = key("attention.head_count"), key("attention.head_count_kv", key("attention.head_count"))
    # The format's defaults: key_length n_embd / n_head, value_length key_length (lfm2's files).
    # mamba2's files: head_count 0 (no attention).
    k_len = key("attention.key_length", key("embedding_length") // n_head if n_head else 0)
    v_len = key("attention.value_length", k_len)
    pattern = key("attention.sliding_window_pattern")
    if isinstance(pattern, list) and pattern[il] and key("attention.key_length_swa") is not None:
        k_len, v_len = key("attention.key_length_swa"), key("attention.value_length_swa")
    return {"1": 1, "n_embd": key("embedding_length"), "n_vocab": shapes["token_embd.weight"][1],
            "q_dim": n_head * k_len, "k_dim": n_kv * k_len, "v_dim": n_kv * v_len, "o_dim": n_head * v_len,
            "head_dim_k": k_len, "n_head": n_head, "n_ff": key("feed_forward_length"),
            # Mixtral's llama files: each expert is feed_forward_length wide.
            "n_ff_expert": key("expert_feed_forward_length", key("feed_forward_length")),
            "n_expert": key("expert_count", 0),
            # glm4moe's shared experts: expert_shared_count experts' width; qwen35moe's gated one
            # its own (expert_shared_feed_forward_length); llama4's one a routed expert's.
            "n_ff_shexp": key("expert_shared_feed_forward_length", 0)
            or key("expert_feed_forward_length", 0) * key("expert_shared_count", 1 if arch == "llama4" else 0),
            "rope_pairs": key("rope.dimension_count", k_len) // 2,
            # Latent attention (deepseek2): its ranks and per-head widths before absorption.
            "q_lora": key("attention.q_lora_rank", 0), "kv_lora": key("attention.kv_lora_rank", 0),
            # Without the *_mla keys (an older conversion, attn_kv_b), key_length's and
            # value_length's widths.
            "qk_nope": key("attention.key_length_mla", k_len) - key("rope.dimension_count", k_len),
            "head_dim_v_mla": key("attention.value_length_mla", v_len),
            "q_dim_mla": n_head * key("attention.key_length_mla", k_len),
            "o_dim_mla": n_head * key("attention.value_length_mla", v_len),
            # attn_kv_a_mqa's rows, and attn_kv_b's.
            "kv_a_mla": key("attention.kv_lora_rank", 0) + key("rope.dimension_count", k_len),
            "kv_b_mla": n_head * (key("attention.key_length_mla", k_len) - key("rope.dimension_count", k_len)
                                  + key("attention.value_length_mla", v_len)),
            "n_cls_out": 1,  # a reranker's labels (an array, not read here); the tiny rerankers have one
            # Gated attention and Gated DeltaNet layers (qwen35).
            # lfm2's short convolutions: the window shortconv.l_cache over n_embd channels.
            "q_dim_gated": 2 * n_head * k_len,
            "ssm_conv_kernel": key("ssm.conv_kernel", 0) or key("shortconv.l_cache", 0),
            "ssm_conv_dim": 2 * key("ssm.group_count", 0) * key("ssm.state_size", 0) + key("ssm.inner_size", 0)
            or (key("embedding_length") if key("shortconv.l_cache") else 0),
            "ssm_inner": key("ssm.inner_size", 0), "ssm_v_heads": key("ssm.time_step_rank", 0),
            "ssm_head_dim": key("ssm.state_size", 0),
            # Mamba-2 layers: B and C's groups, and ssm_norm's group width.
            "ssm_groups": key("ssm.group_count", 0),
            "ssm_group_dim": key("ssm.inner_size", 0) // max(key("ssm.group_count", 0), 1),
            # gemma4 E2B/E4B's per-layer embeddings.
            "n_embd_per_layer": key("embedding_length_per_layer_input", 0),
            "n_embd_per_layer*n_layer": key("embedding_length_per_layer_input", 0) * key("block_count"),
            # gemma-embedding's dense projections after the pooling.
            "n_dense": key("dense_2_feat_out", 0),
            # BERT's token type rows (a vocabulary key) and learned position rows.
            "n_token_types": keys.get("tokenizer.ggml.token_type_count", 0),
            "n_ctx_train": key("context_length")}


def resolve(shape: list[str], dims: dict[str, int]) -> list[int]:
    return [sum(dims[p] for p in d.split("+")) for d in shape]


@pytest.mark.parametrize("path", sorted(TINY.glob("tiny-*.gguf")), ids=lambda p: p.stem)
def test_tiny_model_tensors_match_the_rules(path):
    """Each tensor of a tiny model has a rule and the rule's shape (the generator wrote it from
    them, so this holds the resolution of the extents, done here from the file's own keys)."""
    keys, shapes = read_header(path)
    rules = {r["name"]: r for r in next(a for a in ARCHS if a["name"] == keys["general.architecture"])["tensors"]}
    unmatched = []
    for tensor, shape in shapes.items():
        parts = tensor.split(".", 2)
        name = f"blk.N.{parts[2]}" if parts[0] == "blk" else tensor
        if name not in rules:
            unmatched.append(tensor)
            continue
        dims = dims_of(keys, shapes, int(parts[1]) if parts[0] == "blk" else 0)
        want = resolve(rules[name]["shape"], dims)
        if rules[name]["form"] == "matrix" and want[1:] == [1]:  # a one-row matrix stored as a
            want = want[:1]                                       # vector (ffn_gate_inp_shexp)
        assert shape == want, (tensor, rules[name])
    # Only the variants made to be refused hold a tensor without a rule.
    assert not unmatched or path.stem in ("tiny-llama-extra", "tiny-llama-ffn-bias"), unmatched


def test_text_form_and_an_unknown_name():
    """The text form lists a row's keys and tensors; a name ferrox does not run is a usage
    error (exit 2) that lists the names it does."""
    text = subprocess.run([FERROX, "architectures", "gemma2"], check=True, capture_output=True, text=True).stdout
    assert text.startswith("gemma2\n  keys:\n")
    assert "gemma2.attn_logit_softcapping" in text and "optional, else 50" in text
    assert "blk.N.post_ffw_norm.weight" in text
    bad = subprocess.run([FERROX, "architectures", "mamba"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "'mamba' is not an architecture ferrox runs" in bad.stderr
    assert all(a["name"] in bad.stderr for a in ARCHS)


def test_an_expert_width_the_tensors_disagree_with_is_refused_naming_key_and_tensor(tmp_path):
    """gemma4's experts: expert_feed_forward_length sizes the fused gate/up stack's expected
    shape; a file whose key says 32 over 64-wide experts is refused naming both."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import make_tiny_models as gen

    arch, vocab, opt = gen.GEMMA4_MOE["gemma4-moe"]
    if not (gen.VOCAB_DIR / f"ggml-vocab-{vocab}.gguf").exists():
        pytest.skip(f"{gen.VOCAB_DIR} lacks llama.cpp's {vocab} vocabulary")
    os.environ.setdefault("FERROX_BIN", FERROX)
    path = gen.make(arch, tmp_path, 3600, "gemma4-moe-bad-width", vocab, {**opt, "expert_ff_key": 32})
    r = subprocess.run([FERROX, "run", "-m", str(path), "-p", "hi", "-n", "1"], capture_output=True, text=True)
    assert r.returncode != 0
    assert "blk.0.ffn_gate_up_exps.weight" in r.stderr, r.stderr
    assert "gemma4.expert_feed_forward_length 32" in r.stderr, r.stderr


@pytest.mark.parametrize("layout, change, wanted", [
    # An older conversion (no *_mla keys) without its attn_kv_b: neither layout is there.
    ("kv_b", {"drop": ["blk.N.attn_kv_b.weight"]},
     ["tensor 'blk.0.attn_kv_b.weight' is missing", "key_length_mla is absent", "attn_kv_b"]),
    # The current layout's keys without attn_k_b.
    ("split", {"drop": ["blk.N.attn_k_b.weight"]},
     ["tensor 'blk.0.attn_k_b.weight' is missing", "key_length_mla is given", "attn_k_b and attn_v_b"]),
    # value_length 16 over kv_b rows of 32-wide values: 4 x (32 + 16) rows expected.
    ("kv_b", {"v_key": 16}, ["tensor 'blk.0.attn_kv_b.weight' has shape [64, 256], expected [64, 192]"]),
])
def test_a_latent_attention_file_without_its_layout_is_refused_naming_the_tensor(tmp_path, layout, change, wanted):
    """deepseek2's two layouts (attn_kv_b without the *_mla keys, attn_k_b / attn_v_b with
    them): a file missing its layout's tensor, or whose keys disagree with kv_b's shape, is
    refused naming the tensor (and the layout, or the shapes)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import make_tiny_models as gen

    arch, vocab, opt = gen.DEEPSEEK_KVB["deepseek2-kvb"] if layout == "kv_b" else gen.REARRANGED["deepseek2"]
    if not (gen.VOCAB_DIR / f"ggml-vocab-{vocab}.gguf").exists():
        pytest.skip(f"{gen.VOCAB_DIR} lacks llama.cpp's {vocab} vocabulary")
    os.environ.setdefault("FERROX_BIN", FERROX)
    opt = {**opt, "drop": change.get("drop", [])}
    if "v_key" in change:
        opt["mla"] = {**opt["mla"], "v_key": change["v_key"]}
    path = gen.make(arch, tmp_path, 3800, "deepseek2-bad-layout", vocab, opt)
    r = subprocess.run([FERROX, "run", "-m", str(path), "-p", "hi", "-n", "1"], capture_output=True, text=True)
    assert r.returncode != 0
    for text in wanted:
        assert text in r.stderr, r.stderr
