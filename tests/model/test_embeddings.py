"""`ferrox embed` and the engine's pooling (issue 38 item 3) on tiny qwen3 embedding
models (tests/model/embedding_models.py: last, mean and cls pooling):

- batch invariance: an input's vector is bit-identical alone and among others
  (other inputs before and after it, several rounds, a long input that is decoded
  in chunks), for every pooling;
- the vectors: unit length by default (--normalize none leaves them raw), finite,
  different for different texts and poolings;
- refusals: a chat model asked to embed, an embedding model asked to generate, an
  input longer than the context (named by index).

llama.cpp agreement is tests/parity/test_embedding_parity.py."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

from embedding_models import base_missing, make_embedding_model

FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
if (why := base_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

RNG = np.random.default_rng(20261206)
WORDS = "river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper".split()


def text(n_words: int) -> str:
    return " ".join(RNG.choice(WORDS, n_words))


SHORT, OTHER, MIDDLE = text(3), text(5), text(12)
LONG = text(300)  # ~300 tokens: decoded in chunks of the 256-token batch


def ferrox(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    cmd = [FERROX, *args]
    if os.environ.get("FERROX_PLUGIN_DIR"):
        cmd[1:1] = ["--plugin-dir", os.environ["FERROX_PLUGIN_DIR"]]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, input=stdin, timeout=300)


def embed(model: pathlib.Path, texts: list[str], *flags: str) -> list[list[float]]:
    args = ["embed", "-m", str(model), "-t", "2", "--json", *flags]
    for t in texts:
        args += ["-p", t]
    proc = ferrox(*args)
    assert proc.returncode == 0, proc.stderr
    vectors = json.loads(proc.stdout)
    assert len(vectors) == len(texts)
    return vectors


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("embedding_models")
    return {p: make_embedding_model(d, p) for p in ("last", "mean", "cls", "none")}


@pytest.mark.parametrize("pooling", ["last", "mean", "cls"])
def test_an_input_embeds_the_same_alone_and_among_others(models, pooling):
    model = models[pooling]
    alone = embed(model, [SHORT])[0]
    long_alone = embed(model, [LONG])[0]
    # Among others, in one round and (--parallel 2: one input and the filler a round)
    # in several; the long input in chunks beside them.
    among = embed(model, [OTHER, SHORT, MIDDLE, LONG])
    rounds = embed(model, [MIDDLE, OTHER, LONG, SHORT], "--parallel", "2")
    assert among[1] == alone, "SHORT among three others"
    # One sequence a decode: the short input padded in its own sequence.
    assert embed(model, [SHORT, MIDDLE], "--parallel", "1") == [alone, among[2]], "one sequence"
    assert rounds[3] == alone, "SHORT in a later round"
    assert among[3] == long_alone and rounds[2] == long_alone, "LONG among others"
    assert among[0] == rounds[1] and among[2] == rounds[0]


def test_vectors_are_unit_length_unless_asked_otherwise(models):
    for pooling in ("last", "mean", "cls"):
        unit = np.array(embed(models[pooling], [SHORT, MIDDLE]))
        raw = np.array(embed(models[pooling], [SHORT, MIDDLE], "--normalize", "none"))
        assert np.isfinite(raw).all() and unit.shape == (2, 128)
        np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
        assert abs(np.linalg.norm(raw[0]) - 1.0) > 1e-3, "raw vectors are the pooled rows as they are"
        np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
        assert np.abs(unit[0] - unit[1]).max() > 1e-3, "different texts, different vectors"
    last, mean = (np.array(embed(models[p], [MIDDLE]))[0] for p in ("last", "mean"))
    assert np.abs(last - mean).max() > 1e-3, "the pooling the file states is the one applied"


def test_stdin_lines_are_the_inputs(models):
    proc = ferrox("embed", "-m", str(models["last"]), "-t", "2", "--json", stdin=f"{SHORT}\n{MIDDLE}\n")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == embed(models["last"], [SHORT, MIDDLE])


def test_stdin_is_bounded_in_lines_and_bytes(models):
    proc = ferrox("embed", "-m", str(models["last"]), stdin="a\n" * 65537)
    assert proc.returncode == 2 and "more than 65536 lines" in proc.stderr, proc.stderr[-400:]
    proc = ferrox("embed", "-m", str(models["last"]), stdin="b" * ((64 << 20) + 1))
    assert proc.returncode == 2 and "more than 64 MiB" in proc.stderr, proc.stderr[-400:]


def test_a_chat_model_is_refused_by_embed_and_an_embedding_model_by_run(models):
    proc = ferrox("embed", "-m", str(models["none"]), "-p", SHORT)
    assert proc.returncode == 2 and "not an embedding model" in proc.stderr, proc.stderr
    assert "'qwen3.pooling_type'" in proc.stderr, proc.stderr
    proc = ferrox("run", "-m", str(models["last"]), "-p", SHORT, "-n", "1", "-t", "1", "-c", "64")
    assert proc.returncode != 0
    assert "'qwen3.pooling_type': is 3 (last)" in proc.stderr and "ferrox embed" in proc.stderr, proc.stderr


def test_an_input_longer_than_the_context_is_refused_by_index(models):
    proc = ferrox("embed", "-m", str(models["last"]), "-c", "32", "-p", SHORT, "-p", LONG)
    assert proc.returncode == 2, proc.stderr
    assert "input 2 is" in proc.stderr and "context's 32" in proc.stderr, proc.stderr


# A non-causal encoder (tests/model/make_tiny_models.py, EMBEDDING): tiny-gemma-embedding,
# EmbeddingGemma's layout, from the shared tiny models (llama.cpp agreement is
# tests/parity/test_encoder_parity.py).
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))
ENCODER = TINY / "tiny-gemma-embedding.gguf"
needs_encoder = pytest.mark.skipif(not ENCODER.exists(), reason=f"{ENCODER} is absent (make_tiny_models.py)")


@needs_encoder
def test_a_non_causal_input_embeds_the_same_alone_and_among_others():
    # Other sequences in the same decode never see it (nor it them), and the filler that
    # pads a short round sits in a sequence of its own.
    alone = embed(ENCODER, [SHORT])[0]
    among = embed(ENCODER, [OTHER, SHORT, MIDDLE])
    assert among[1] == alone, "SHORT among two others"
    assert among[2] == embed(ENCODER, [MIDDLE])[0], "MIDDLE after two others"
    # Later tokens change an earlier one's row: the first word's vector differs with what follows.
    cls_like = embed(ENCODER, [SHORT + " river", SHORT + " copper"])
    assert np.abs(np.array(cls_like[0]) - np.array(cls_like[1])).max() > 1e-3


@needs_encoder
def test_a_non_causal_encoder_refuses_generation_and_inputs_longer_than_a_batch():
    proc = ferrox("run", "-m", str(ENCODER), "-p", SHORT, "-n", "1", "-t", "1", "-c", "64")
    assert proc.returncode != 0
    assert "is 'gemma-embedding': non-causal" in proc.stderr and "never for text generation" in proc.stderr, \
        proc.stderr
    # LONG is ~300 tokens: a causal model decodes it in chunks of the batch; a non-causal one
    # cannot (its first rows must see the last), and its batch is the trained context, 256.
    proc = ferrox("embed", "-m", str(ENCODER), "-p", SHORT, "-p", LONG)
    assert proc.returncode != 0, proc.stderr
    assert "input 1 has" in proc.stderr and "a non-causal model embeds each input in one batch" in proc.stderr, \
        proc.stderr
