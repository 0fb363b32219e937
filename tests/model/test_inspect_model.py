"""`ferrox inspect --json`'s "model" section against the file itself, read by the `gguf`
package, and against llama.cpp's layer rules: which layers attend through the sliding
window (llama.cpp's set_swa_pattern(n): layer il is local when il % n < n - 1) and which
skip RoPE (smollm3: every fourth). What inspect says it will run must be what the file
and the reference say, on every tiny model the generator makes.
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

gguf = pytest.importorskip("gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import gguf_in_memory  # noqa: E402

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)

CACHE = pathlib.Path(os.environ.get("FERROX_CACHE_DIR", pathlib.Path.home() / ".cache" / "ferrox"))
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", CACHE / "tiny-models"))

# llama.cpp's window period per architecture (its load_arch_hparams), where the file
# may override it with <arch>.attention.sliding_window_pattern.
SWA_PERIOD = {"gemma3": 6, "gemma2": 2, "olmo2": 4, "gpt-oss": 2}
NO_ROPE_STEP = {"smollm3": 4, "bert": 1, "llama4": 4}  # bert: learned positions, no layer rotates
# llama.cpp's chunked attention (llama4's load_arch_hparams: chunks of 8192 on the layers
# il % 4 < 3 unless attention.sliding_window is 0); the chunk size is its constant.
CHUNKED = {"llama4": (4, 8192)}
# Rows with one shared expert always, no count key (llama4's loader).
ONE_SHARED_EXPERT = {"llama4"}
# llama.cpp's graphs that weigh experts by a softmax over the top k router logits
# (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT) rather than the top k of a softmax.
SOFTMAX_OF_TOP_K = {"gpt-oss"}
# llama.cpp's graphs that leave q . k unscaled (gemma4's load_arch_hparams: f_attention_scale 1).
UNIT_ATTENTION_SCALE = {"gemma4"}


def deepseek2_mscale(reader, arch: str) -> float:
    """llama.cpp's deepseek2 q.k factor's root: attn_factor (1 + 0.1 ln s) (1 + 0.1 m ln s), s
    the scaling factor, m the file's yarn_log_multiplier / 0.1, attn_factor as llama.cpp's
    context sets it (with YaRN: 1 where m is set, else mscale(s) / (1 + 0.1 ln s), then times
    rope.scaling.attn_factor)."""
    kind = field(reader, f"{arch}.rope.scaling.type") or "linear"
    factor = field(reader, f"{arch}.rope.scaling.factor") or 0.0
    s = 1.0 if kind == "none" or factor == 0 else factor
    m = (field(reader, f"{arch}.rope.scaling.yarn_log_multiplier") or 0.0) / 0.1
    attn = 1.0
    if kind == "yarn":
        attn = (1.0 if m != 0 else (1 + 0.1 * math.log(s) if s > 1 else 1.0)) / (1 + 0.1 * math.log(s))
    attn *= field(reader, f"{arch}.rope.scaling.attn_factor") or 1.0
    return attn * (1 + 0.1 * math.log(s)) * (1 + 0.1 * m * math.log(s))


def tiny_models() -> list[pathlib.Path]:
    found = sorted(TINY.glob("tiny-*.gguf"))
    if not found:
        pytest.skip(f"no tiny models in {TINY} (python3 tests/model/make_tiny_models.py)")
    return found


def field(reader, key: str):
    f = reader.fields.get(key)
    if f is None:
        return None
    value = f.contents()
    return value


def inspect(path: pathlib.Path) -> tuple[dict | None, bool]:
    """The model facts (None when the hyper-parameters were refused) and whether
    binding the tensors refused the file."""
    cmd = [FERROX, "inspect", str(path), "--json"]
    if os.environ.get("FERROX_PLUGIN_DIR"):
        cmd[1:1] = ["--plugin-dir", os.environ["FERROX_PLUGIN_DIR"]]
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    doc = json.loads(r.stdout)
    # A file the binding refuses (the generator's deliberately bad ones) exits 2 with its
    # model_error; its hyper-parameters were read all the same.
    assert r.returncode == (2 if "model_error" in doc else 0), r.stderr
    # Hyper-parameters refused (llama with partial rotary): no facts, only the error.
    assert "model" in doc or "model_error" in doc, doc.keys()
    return doc.get("model"), "model_error" in doc


def expected_pattern(arch: str, reader, n_layer: int) -> str:
    window = field(reader, f"{arch}.attention.sliding_window")
    period = field(reader, f"{arch}.attention.sliding_window_pattern") or SWA_PERIOD.get(arch, 0)
    pattern = []
    kv, ff = field(reader, f"{arch}.attention.head_count_kv"), field(reader, f"{arch}.feed_forward_length")
    if arch in ("granitehybrid", "nemotron_h", "nemotron_h_moe"):
        # llama.cpp's rule: 0 KV heads a Mamba-2 block (R), or with a width an FFN alone (F,
        # nemotron_h); attention rotates unless rope.scaling.finetuned is false (granitehybrid),
        # never on nemotron_h(_moe).
        rotates = arch == "granitehybrid" and field(reader, f"{arch}.rope.scaling.finetuned") is not False
        ff = ff if isinstance(ff, list) else [0] * n_layer
        return "".join("G" if kv[il] and rotates else "g" if kv[il] else "F" if ff[il] else "R"
                       for il in range(n_layer))
    for il in range(n_layer):
        if isinstance(period, list):  # gemma4: one bool per layer (true: sliding window)
            local = bool(window) and bool(period[il])
        else:
            local = bool(window) and period > 0 and il % period < period - 1
        c = "L" if local else "G"
        if arch in CHUNKED and window != 0 and il % CHUNKED[arch][0] < CHUNKED[arch][0] - 1:
            c = "C"
        # Recurrent (Gated DeltaNet) layers: as attention.recurrent_layers lists them, else
        # all but every full_attention_interval-th (qwen35, qwen35moe).
        listed = field(reader, f"{arch}.attention.recurrent_layers")
        interval = field(reader, f"{arch}.full_attention_interval")
        if listed is not None:
            if listed[il]:
                c = "R"
        elif field(reader, f"{arch}.ssm.conv_kernel") and (il + 1) % (interval or 4) != 0:
            c = "R"
        # lfm2's short-convolution layers: 0 KV heads in the per-layer list.
        kv = field(reader, f"{arch}.attention.head_count_kv")
        if field(reader, f"{arch}.shortconv.l_cache") and isinstance(kv, list) and kv[il] == 0:
            c = "R"
        step = NO_ROPE_STEP.get(arch, 0)
        if step and (il + 1) % step == 0:
            c = c.lower()
        pattern.append(c)
    return "".join(pattern)


@pytest.mark.parametrize("path", tiny_models(), ids=lambda p: p.stem)
def test_inspect_states_what_the_file_and_llama_cpp_say(path: pathlib.Path):
    reader = gguf_in_memory.read(path)
    arch = field(reader, "general.architecture")
    got, refused = inspect(path)
    if got is None:
        return  # refused before any fact was read; the message is model_non_chat_files' and parity's
    # llama.cpp runs block_count - nextn_predict_layers (llama_hparams::n_layer()): the last
    # blocks are NextN/MTP blocks for speculative decoding, which inspect reports as unused.
    n_nextn = field(reader, f"{arch}.nextn_predict_layers") or 0
    n_layer = field(reader, f"{arch}.block_count") - n_nextn
    assert got.get("nextn_layers_unused", 0) == n_nextn
    n_head = field(reader, f"{arch}.attention.head_count")
    n_embd = field(reader, f"{arch}.embedding_length")
    if arch == "mamba2":  # every layer a Mamba-2 block: no heads, no FFN; the ssm keys as read
        inner, heads = field(reader, f"{arch}.ssm.inner_size"), field(reader, f"{arch}.ssm.time_step_rank")
        embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
        want = {"architecture": arch, "layers": n_layer, "embedding_length": n_embd, "heads": 0, "kv_heads": 0,
                "context_train": field(reader, f"{arch}.context_length"), "vocab": int(embd.shape[1]),
                "layer_pattern": "R" * n_layer, "ffn": "none",
                "ssm_conv_kernel": field(reader, f"{arch}.ssm.conv_kernel"), "ssm_inner_size": inner,
                "ssm_state_size": field(reader, f"{arch}.ssm.state_size"), "ssm_heads": heads,
                "ssm_head_dim": inner // heads, "ssm_groups": field(reader, f"{arch}.ssm.group_count")}
        for key, value in want.items():
            assert got[key] == value, f"{path.name}: {key} is {got[key]!r}, the file says {value!r}"
        return
    n_head_kv = field(reader, f"{arch}.attention.head_count_kv") or n_head
    if isinstance(n_head_kv, list):  # gemma4, lfm2: one per layer; the summary's is the largest
        assert got["kv_heads_per_layer"] == ",".join(str(v) for v in n_head_kv)
        n_head_kv = max(n_head_kv)
    key_swa = field(reader, f"{arch}.attention.key_length_swa")
    if key_swa is not None:  # gemma4: the sliding layers' own head size
        assert got["head_dim_k_swa"] == key_swa
        assert got["head_dim_v_swa"] == field(reader, f"{arch}.attention.value_length_swa")
    want = {
        "architecture": arch,
        "layers": n_layer,
        "embedding_length": n_embd,
        "heads": n_head,
        "kv_heads": n_head_kv,
        "context_train": field(reader, f"{arch}.context_length"),
        "head_dim_k": field(reader, f"{arch}.attention.key_length") or n_embd // n_head,
        "layer_pattern": expected_pattern(arch, reader, n_layer),
    }
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    want["vocab"] = int(embd.shape[1])  # gguf lists dims innermost first
    for key, value in want.items():
        assert got[key] == value, f"{path.name}: {key} is {got[key]!r}, the file says {value!r}"
    window = field(reader, f"{arch}.attention.sliding_window")
    if "L" in want["layer_pattern"]:
        assert got["sliding_window"] == window
    if "C" in want["layer_pattern"]:
        assert got["attention_chunk"] == CHUNKED[arch][1]
    scale = field(reader, f"{arch}.attention.scale")  # granite's key
    mla_k = field(reader, f"{arch}.attention.key_length_mla")  # latent attention: q.k before absorption
    if arch in UNIT_ATTENTION_SCALE:
        scale = 1.0
    if scale is None and not (arch == "gemma3" and n_layer == 62):
        scale = 1 / math.sqrt(mla_k or want["head_dim_k"])
    if arch == "deepseek2":  # DeepSeek's YaRN: q.k scaled by mscale^2 as well
        scale *= deepseek2_mscale(reader, arch) ** 2
    if arch == "deepseek2":  # the *_mla keys choose the layout, as llama.cpp
        assert got["mla_layout"] == ("absorbed" if mla_k else "kv_b"), got
    if mla_k:
        for ours, key in (("mla_q_lora_rank", "q_lora_rank"), ("mla_kv_lora_rank", "kv_lora_rank"),
                          ("mla_head_dim_k", "key_length_mla"), ("mla_head_dim_v", "value_length_mla")):
            assert got[ours] == (field(reader, f"{arch}.attention.{key}") or 0), ours
    if scale is not None:
        assert math.isclose(got["attention_scale"], scale, rel_tol=1e-6), (got["attention_scale"], scale)
    if arch == "gemma2":
        assert got["attention_softcap"] > 0 and got["final_softcap"] > 0
    # An encoder: non-causal whatever its key says (gemma-embedding), else as the key says.
    causal = arch != "gemma-embedding" and field(reader, f"{arch}.attention.causal") is not False
    assert got.get("attention", "causal") == ("causal" if causal else "non-causal"), got
    dense = field(reader, f"{arch}.dense_2_feat_out") or 0
    assert got.get("dense_projections", 0) == dense, got
    final_cap = field(reader, f"{arch}.final_logit_softcapping")
    if arch == "gemma4":  # the file's cap, or none
        assert "attention_softcap" not in got
        assert math.isclose(got.get("final_softcap", 0.0), final_cap or 0.0, rel_tol=1e-6), got
    n_expert = field(reader, f"{arch}.expert_count")
    if n_expert:
        assert got["experts"] == n_expert and got["experts_used"] == field(reader, f"{arch}.expert_used_count")
        # llama.cpp's expert_gating_func where the file says (1 softmax, 2 sigmoid, 3 softmax of
        # the top k), else the architecture's (glm4moe's loader turns "none" into sigmoid).
        default = ("softmax_of_top_k" if arch in SOFTMAX_OF_TOP_K
                   else "sigmoid" if arch in ("glm4moe", "llama4") else "softmax")
        gating = {1: "softmax", 2: "sigmoid", 3: "softmax_of_top_k"}.get(
            field(reader, f"{arch}.expert_gating_func"), default)
        if arch == "nemotron_h_moe":  # llama.cpp's graph passes sigmoid, whatever the key says
            gating = "sigmoid"
        assert got["expert_gating"] == gating
        assert got.get("expert_biases", False) == any(t.name.endswith("_exps.bias") for t in reader.tensors)
        assert got.get("expert_selection_bias", False) == any(t.name.endswith(".exp_probs_b.bias")
                                                              for t in reader.tensors)
        # One shared expert where its width is given (granitehybrid, nemotron_h_moe: llama.cpp
        # reads expert_shared_feed_forward_length; nemotron_h_moe's expert_shared_count is unused).
        width_rows = ("granitehybrid", "nemotron_h_moe")
        shared = (1 if arch in ONE_SHARED_EXPERT
                  else int(bool(field(reader, f"{arch}.expert_shared_feed_forward_length"))) if arch in width_rows
                  else field(reader, f"{arch}.expert_shared_count") or 0)
        assert got.get("shared_experts", 0) == shared
        # gemma4's expert layers keep their dense FFN, with the branches' own norms.
        assert got.get("dense_ffn_beside_experts", False) == any(t.name.endswith(".pre_ffw_norm_2.weight")
                                                                 for t in reader.tensors)
    if not refused:  # the file's tensors are what the architecture runs
        names = {t.name for t in reader.tensors}
        assert got.get("attention_sinks", False) == ("blk.0.attn_sinks.weight" in names)
        assert got.get("attn_output_bias", False) == ("blk.0.attn_output.bias" in names)
