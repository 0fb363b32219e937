"""The KV cache holds K and V only for the layers that attend (issue 35).

`ferrox inspect --json` reports the capacity plan's KV figures (kv_cache:
bytes_per_position, bytes at its context). Each is computed here again from
the file's own keys with the `gguf` package, as llama.cpp reads them: which
layers are recurrent (qwen35's attention.recurrent_layers or
full_attention_interval, lfm2's zero KV-head counts), the KV heads and head
sizes, and the cache kind's block. Expected: attending layers x cells x
per-cell bytes. The fault a cache over every layer would be -- the count
before this change -- must differ from the report on every hybrid model, so
the first test cannot pass by counting all layers. A Qwen3.5-27B-shaped file
(keys only, a token_embd of 8 rows) gives the real-shaped figure.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import gguf_in_memory  # noqa: E402

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
HYBRID = ["qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe", "granitehybrid", "nemotron_h"]
# llama4: its chunked layers keep every cell too (docs/models.md, "Llama 4"), so all layers count.
PLAIN = ["llama", "qwen3", "llama4"]
# Bytes per block and elements per block of each cache kind (ggml's).
KINDS = {"f32": (4, 1), "f16": (2, 1), "q8_0": (34, 32)}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


@functools.lru_cache(maxsize=None)  # a reader parses the whole vocabulary: once a file
def layer_terms(path: pathlib.Path):
    """(which layers attend, K elements per layer, V elements per layer), from the keys."""
    r = gguf_in_memory.read(path)
    arch = field(r, "general.architecture")
    key = lambda k, d=None: field(r, f"{arch}.{k}", d)  # noqa: E731
    n_layer = key("block_count") - key("nextn_predict_layers", 0)
    n_head = key("attention.head_count")
    kv = key("attention.head_count_kv", n_head)
    n_embd = key("embedding_length")
    hd_k = key("attention.key_length", n_embd // n_head)
    hd_v = key("attention.value_length", n_embd // n_head)
    if isinstance(kv, list):  # lfm2, the Mamba-2 hybrids: 0 marks a layer that does not attend
        attends = [h != 0 for h in kv[:n_layer]]
        kv = max(kv)
    elif key("attention.recurrent_layers") is not None:
        attends = [not x for x in key("attention.recurrent_layers")[:n_layer]]
    elif arch in ("qwen35", "qwen35moe", "qwen3next"):
        every = key("full_attention_interval", 4)
        attends = [(il + 1) % every == 0 for il in range(n_layer)]
    else:
        attends = [True] * n_layer
    return tuple(attends), kv * hd_k, kv * hd_v


def kv_terms(path: pathlib.Path, count_all_layers: bool = False):
    """(cached layers, K elements per layer, V elements per layer)."""
    attends, k, v = layer_terms(path)
    return (len(attends) if count_all_layers else sum(attends)), k, v


def expected(path, kind, cells, count_all_layers=False):
    layers, k, v = kv_terms(path, count_all_layers)
    block_bytes, block_elements = KINDS[kind]
    return layers * cells * (k + v) * block_bytes // block_elements


def inspect(path, kind="f32"):
    env = {k: v for k, v in os.environ.items() if k != "FERROX_CONFIG"}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    r = subprocess.run([FERROX, "--log-level", "error", "inspect", "--json", "--kv-type", kind,
                        str(path)], capture_output=True, text=True, timeout=120, env=env)
    return json.loads(r.stdout)


def tiny(name):
    path = TINY / f"tiny-{name}.gguf"
    if not path.exists():
        pytest.skip(f"no {path} (tests/model/make_tiny_models.py)")
    return path


@pytest.mark.parametrize("kind", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("name", HYBRID + PLAIN)
def test_kv_bytes_count_only_the_attending_layers(name, kind):
    path = tiny(name)
    cache = inspect(path, kind)["kv_cache"]
    print(name, kind, cache, "layers, K, V per layer:", kv_terms(path))
    assert cache["bytes_per_position"] == expected(path, kind, 1)
    assert cache["bytes"] == expected(path, kind, cache["context"])


@pytest.mark.parametrize("name", HYBRID)
def test_a_cache_over_every_layer_would_be_caught(name):
    """The fault: K and V for every layer (what the cache held before). The
    expected figure of the test above must not match it, on every hybrid model."""
    path = tiny(name)
    cache = inspect(path)["kv_cache"]
    wrong = expected(path, "f32", cache["context"], count_all_layers=True)
    layers, _, _ = kv_terms(path)
    print(name, "attending layers", layers, "reported", cache["bytes"], "all layers", wrong)
    assert layers < kv_terms(path, count_all_layers=True)[0]
    assert cache["bytes"] != wrong
    assert cache["bytes"] == expected(path, "f32", cache["context"])


def write_qwen35_27b_shape(path: pathlib.Path):
    """Qwen3.5-27B's attention and layer shape (64 layers, every 4th full
    attention with 4 KV heads of 256, 5120 wide), keys only: inspect's KV
    figures come from the keys before any weight is bound."""
    w = gguf.GGUFWriter(str(path), "qwen35")
    w.add_context_length(262144)
    w.add_embedding_length(5120)
    w.add_block_count(64)
    w.add_feed_forward_length(17408)
    w.add_head_count(24)
    w.add_head_count_kv(4)
    w.add_key_length(256)
    w.add_value_length(256)
    w.add_rope_dimension_count(64)
    w.add_rope_freq_base(1e7)
    w.add_rope_dimension_sections([11, 11, 10, 0])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_ssm_conv_kernel(4)
    w.add_ssm_state_size(128)
    w.add_ssm_inner_size(48 * 128)
    w.add_ssm_time_step_rank(48)
    w.add_ssm_group_count(16)
    w.add_uint32("qwen35.full_attention_interval", 4)
    w.add_tensor("token_embd.weight", np.zeros((8, 5120), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_real_shaped_qwen35_cache(tmp_path):
    path = tmp_path / "qwen35-27b-shape.gguf"
    write_qwen35_27b_shape(path)
    cache = inspect(path, "f16")["kv_cache"]
    layers, k, v = kv_terms(path)
    assert (layers, k, v) == (16, 1024, 1024)
    per_position = 16 * (1024 + 1024) * 2  # 64 KiB; 256 KiB over all 64 layers
    print("Qwen3.5-27B shape, f16:", cache, "all layers would be",
          expected(path, "f16", 1, count_all_layers=True), "bytes per position")
    assert cache["bytes_per_position"] == per_position == expected(path, "f16", 1)
    assert cache["bytes"] == per_position * cache["context"]
