"""`ferrox run --model-draft` (docs/speculation.md): a second model of the
same vocabulary drafts, the target verifies, and the tokens are those of a
plain run -- greedy and seeded, whether the draft is always right (the target
itself), often right (the target's weights with noise on its output
projection), or never (an unrelated model). Refusals name the difference:
vocabulary size, the first differing token, a special-token id, the
tokenizer model, a recurrent draft.

The small llamas are written here by the independent `gguf` package; the
tiny-model pairs and Gemma 3 270M are used when present.
"""
from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)

TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
GEMMA = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"
SEED = int(os.environ.get("FERROX_TEST_SEED", "3900"))
WORDS = ["\u2581hello", "\u2581world", "\u2581the", "\u2581cat", "\u2581sat", "\u2581on", "\u2581mat",
         "\u2581red", "\u2581green", "\u2581blue"]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    e["XDG_CONFIG_HOME"] = "/nonexistent"
    return e


def run(model, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([FERROX, "run", "-m", str(model), "-t", "2", "--json", *args],
                          capture_output=True, text=True, env=env(), timeout=300)


def run_json(model, *args: str) -> dict:
    out = run(model, *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def write_model(path: pathlib.Path, words=WORDS, eos: int = 2, noise: float = 0.0,
                n_embd: int = 64, n_ff: int = 128) -> pathlib.Path:
    """A one-layer llama of SEED's weights; `noise` adds that much (relative)
    Gaussian noise to the output projection, so that its greedy choice
    sometimes differs from the noiseless model's."""
    rng = np.random.default_rng(SEED)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + list(words)
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * n_vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(eos)
    w.add_unk_token_id(0)
    w.add_context_length(512)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_feed_forward_length(n_ff)

    # The vocabulary is drawn for the largest one, so that the shared rows
    # of two sizes are the same weights.
    def weight(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    embd, out = weight(n_vocab, n_embd), weight(n_vocab, n_embd)
    if noise:
        out = out + (noise * np.random.default_rng(SEED + 1).standard_normal(out.shape)
                     * np.abs(out).mean()).astype(np.float32)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", norm(n_embd))
    w.add_tensor("output.weight", out)
    w.add_tensor("blk.0.attn_norm.weight", norm(n_embd))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{name}.weight", weight(n_embd, n_embd))
    w.add_tensor("blk.0.ffn_norm.weight", norm(n_embd))
    w.add_tensor("blk.0.ffn_gate.weight", weight(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_up.weight", weight(n_ff, n_embd))
    w.add_tensor("blk.0.ffn_down.weight", weight(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("draft_model")
    return {
        "target": write_model(d / "target.gguf"),
        "near": write_model(d / "near.gguf", noise=0.6),
        "other": write_model(d / "other.gguf", noise=20.0),
        "renamed": write_model(d / "renamed.gguf", words=WORDS[:-1] + ["\u2581dog"]),
        "longer": write_model(d / "longer.gguf", words=WORDS + ["\u2581dog"]),
        "eos": write_model(d / "eos.gguf", eos=0),
    }


PROMPT = "hello world the cat sat on the mat red green blue the cat"


def same_tokens(target, draft, *args: str) -> dict:
    """The draft run's speculation report, after checking that its tokens are
    the plain run's."""
    plain = run_json(target, "-p", PROMPT, *args)
    spec = run_json(target, "-p", PROMPT, *args, "--model-draft", str(draft))
    assert spec["tokens"] == plain["tokens"]
    assert len(spec["tokens"]) > 10
    s = spec["speculation"]
    assert s["source"] == "model" and s["draft_max"] == 8  # --model-draft's default length
    assert s["accepted_tokens"] <= s["drafted_tokens"]
    return s


def test_greedy_self_draft_is_always_accepted(models):
    """The target as its own draft: one-row decodes equal the verify rows bit
    for bit, so every greedy draft token is accepted."""
    s = same_tokens(models["target"], models["target"], "-n", "40", "--temp", "0")
    assert s["drafted_tokens"] > 0 and s["accepted_tokens"] == s["drafted_tokens"]
    assert s["decode_passes"] < 10


def test_greedy_near_draft_is_partly_accepted(models):
    """Noise on the draft's output: some drafts right, some cut short -- the
    rejected tails of both caches are dropped and the text is unchanged."""
    s = same_tokens(models["target"], models["near"], "-n", "60", "--temp", "0")
    assert 0 < s["accepted_tokens"] < s["drafted_tokens"], s


def test_greedy_unrelated_draft(models):
    s = same_tokens(models["target"], models["other"], "-n", "40", "--temp", "0")
    assert s["accepted_tokens"] < s["drafted_tokens"], s


@pytest.mark.parametrize("temp", ["0.5", "1.0"])
def test_seeded_draws_are_the_plain_ones(models, temp):
    """Sampled: one draw per emitted token from the seeded stream, as plain decoding."""
    s = same_tokens(models["target"], models["near"], "-n", "60", "--temp", temp, "--seed", "7")
    assert s["drafted_tokens"] > 0


def test_draft_length_flag(models):
    spec = run_json(models["target"], "-p", PROMPT, "-n", "30", "--temp", "0",
                    "--model-draft", str(models["target"]), "--spec-draft-n-max", "3")
    assert spec["speculation"]["draft_max"] == 3
    off = run_json(models["target"], "-p", PROMPT, "-n", "30", "--temp", "0",
                   "--model-draft", str(models["target"]), "--spec-draft-n-max", "0")
    assert "speculation" not in off and off["tokens"] == spec["tokens"]


def refusal(target, draft) -> str:
    out = run(target, "-p", PROMPT, "-n", "4", "--model-draft", str(draft))
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stdout == ""
    return out.stderr


def test_refusals_name_the_difference(models):
    t = models["target"]
    why = refusal(t, models["renamed"])
    n = 259 + len(WORDS) - 1
    assert f"token {n}: '\u2581blue' vs '\u2581dog'" in why, why
    why = refusal(t, models["longer"])
    assert f"vocabulary size {259 + len(WORDS)} vs {260 + len(WORDS)}" in why, why
    why = refusal(t, models["eos"])
    assert "tokenizer.ggml.eos_token_id '2' vs '0'" in why, why


@pytest.mark.parametrize("target,draft,words", [
    ("tiny-llama", "tiny-qwen3", ["tokenizer.ggml.model 'llama' vs 'gpt2'", "vocabulary size"]),
    ("tiny-qwen3", "tiny-qwen35", ["'qwen35' has recurrent layers"]),
])
def test_tiny_refusals(target, draft, words):
    t, d = TINY / f"{target}.gguf", TINY / f"{draft}.gguf"
    if not t.exists() or not d.exists():
        pytest.skip(f"no {t} or {d} (tests/model/make_tiny_models.py)")
    why = refusal(t, d)
    for w in words:
        assert w in why, why


@pytest.mark.parametrize("target,draft", [("tiny-llama", "tiny-llama"), ("tiny-llama", "tiny-gemma3"),
                                          ("tiny-qwen3", "tiny-qwen2")])
@pytest.mark.parametrize("temp", ["0", "0.9"])
def test_tiny_model_pairs(target, draft, temp):
    t, d = TINY / f"{target}.gguf", TINY / f"{draft}.gguf"
    if not t.exists() or not d.exists():
        pytest.skip(f"no {t} or {d} (tests/model/make_tiny_models.py)")
    prompt = " ".join(random.Random(target).choice(["red", "green", "blue", "one", "two"])
                      for _ in range(30))
    args = ["-p", prompt, "-n", "40", "--temp", temp, "--seed", "11"]
    plain = run_json(t, *args)
    spec = run_json(t, *args, "--model-draft", str(d))
    assert spec["tokens"] == plain["tokens"]
    assert spec["speculation"]["drafted_tokens"] > 0
    if target == draft and temp == "0":
        s = spec["speculation"]
        assert s["accepted_tokens"] == s["drafted_tokens"]


def test_recurrent_target_runs_without_drafts():
    t, d = TINY / "tiny-qwen35.gguf", TINY / "tiny-qwen3.gguf"
    if not t.exists() or not d.exists():
        pytest.skip(f"no {t} or {d} (tests/model/make_tiny_models.py)")
    args = ["-p", "red green blue one two red", "-n", "16", "--temp", "0"]
    plain = run_json(t, *args)
    out = run(t, *args, "--model-draft", str(d))
    assert out.returncode == 0, out.stderr
    assert "draft-model speculation is off for 'qwen35'" in out.stderr
    spec = json.loads(out.stdout)
    assert spec["tokens"] == plain["tokens"] and "speculation" not in spec


def test_gemma_self_draft_sanity():
    """Gemma 3 270M as its own draft: the machinery on a real model (every
    greedy draft accepted; not a speed measurement)."""
    if not GEMMA.exists():
        pytest.skip(f"no {GEMMA}")
    args = ["-p", "Write a short poem about the sea.", "--chat", "-n", "32", "--temp", "0"]
    plain = run_json(GEMMA, *args)
    spec = run_json(GEMMA, *args, "--model-draft", str(GEMMA))
    assert spec["tokens"] == plain["tokens"]
    s = spec["speculation"]
    assert s["drafted_tokens"] > 0 and s["accepted_tokens"] == s["drafted_tokens"]
