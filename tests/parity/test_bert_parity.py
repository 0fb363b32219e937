"""BERT encoders against llama.cpp (issues 35 and 38): tiny-bert (tests/model/make_tiny_models.py,
BERT: BGE / all-MiniLM's layout -- token type and learned position rows, LayerNorms with biases
after attention and after a GELU FFN, q/k/v/output/FFN biases, attention both ways, WordPiece
vocabulary) embedded by `ferrox embed` (all inputs in one call) and by llama.cpp
(llama-cpp-python's Llama(embedding=True).embed, one input a call, normalised, the pooling the
file states). Every input's vectors must agree to cosine >= 0.9999, and the token counts must
match; the relative error |got - want| / |want| is printed beside the cosines.

Both poolings the BERT family uses run: mean (the file's) and cls (the same weights with
`bert.pooling_type` 2). The comparison must catch a pass that left the token type row out
(llama.cpp on tiny-bert-notypes: the same weights without token_types) and one that pooled
by the wrong rule (llama.cpp pooling cls where ferrox pools mean).

tiny-nomic-bert (nomic-embed-text's layout: fused attn_qkv, NeoX RoPE at base 1000, a SwiGLU
FFN, bert's post-LayerNorms) is held to the same bound; llama.cpp on its weights with
rope.freq_base 10000 (tiny-nomic-bert-base10k) must fail it. Beside the parity: an input's
vector is bit-identical alone and among the others, and `ferrox run` refuses both files naming
the architecture (non-causal: pooled output only).
Skipped visibly when llama-cpp-python or the tiny models are absent."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import llama_ref

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from embedding_models import set_u32_key  # noqa: E402

llama_cpp = llama_ref.require_llama_cpp()
FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))
MODEL = TINY / "tiny-bert.gguf"
NOTYPES = TINY / "tiny-bert-notypes.gguf"
NOMIC = TINY / "tiny-nomic-bert.gguf"
NOMIC_BASE10K = TINY / "tiny-nomic-bert-base10k.gguf"
if not all(p.exists() for p in (MODEL, NOTYPES, NOMIC, NOMIC_BASE10K)):
    pytest.skip(f"{MODEL} or its variants are absent (tests/model/make_tiny_models.py makes them)",
                allow_module_level=True)

MIN_COSINE = 0.9999
RNG = np.random.default_rng(3735)
WORDS = llama_ref.EMBED_WORDS
# Short and long (the long ones take the CPU plugin's panel GEMM: more than 16 rows); the
# learned positions run to the longest input's.
TEXTS = [" ".join(RNG.choice(WORDS, n)) for n in (1, 3, 9, 23, 60, 140)] + ["Hello, world!"]


def llama_vectors(model: pathlib.Path) -> tuple[np.ndarray, list[int]]:
    return llama_ref.llama_embed_vectors(llama_cpp, model, TEXTS, n_ctx=256)


def check_agree(name: str, got: np.ndarray, want: np.ndarray, counts: list[int]) -> None:
    llama_ref.check_vectors_agree(name, got, want, counts, MIN_COSINE)








@pytest.fixture(scope="module")
def cls_model(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("bert") / "tiny-bert-cls.gguf"
    path.write_bytes(set_u32_key(MODEL.read_bytes(), "bert.pooling_type", 2))
    return path


@pytest.fixture(scope="module")
def got(cls_model) -> dict[str, np.ndarray]:
    return {name: llama_ref.ferrox_embed_vectors(FERROX, path, TEXTS)
            for name, path in (("mean", MODEL), ("cls", cls_model), ("notypes", NOTYPES),
                               ("nomic", NOMIC))}


def test_bert_mean_matches_llama_cpp(got):
    check_agree("bert (mean)", got["mean"], *llama_vectors(MODEL))


def test_bert_cls_matches_llama_cpp(got, cls_model):
    check_agree("bert (cls)", got["cls"], *llama_vectors(cls_model))


def test_bert_without_token_types_matches_llama_cpp(got):
    check_agree("bert-notypes", got["notypes"], *llama_vectors(NOTYPES))


def test_a_dropped_token_type_row_is_caught(got):
    want, _ = llama_vectors(NOTYPES)
    c = llama_ref.cosines(got["mean"], want)
    print(f"\nwithout the type row: cosines {np.round(c, 5).tolist()}")
    assert c.min() < MIN_COSINE, f"a dropped token type row went unnoticed: cosines {c.tolist()}"


def test_the_wrong_pooling_is_caught(got, cls_model):
    want, _ = llama_vectors(cls_model)
    c = llama_ref.cosines(got["mean"], want)
    print(f"\nmean against cls: cosines {np.round(c, 5).tolist()}")
    # One token pools the same either way; every longer input must differ.
    assert c[1:-1].max() < MIN_COSINE, f"mean pooling passed for cls: cosines {c.tolist()}"


def test_nomic_bert_matches_llama_cpp(got):
    check_agree("nomic-bert", got["nomic"], *llama_vectors(NOMIC))


def test_a_wrong_rope_base_is_caught(got):
    want, _ = llama_vectors(NOMIC_BASE10K)
    c = llama_ref.cosines(got["nomic"], want)
    print(f"\nrope base 10000 for 1000: cosines {np.round(c, 5).tolist()}")
    assert c.min() < MIN_COSINE, f"a wrong RoPE base went unnoticed: cosines {c.tolist()}"


def test_an_input_embeds_the_same_alone_and_among_others(got):
    """Batch invariance to the bit (docs/models.md, "Pooling"): each input alone in its own
    `ferrox embed` call against the same input among the others (one call, shared decodes)."""
    for i in (0, 3, 5):
        alone = llama_ref.ferrox_embed_vectors(FERROX, MODEL, [TEXTS[i]])
        assert np.array_equal(alone[0], got["mean"][i]), f"input {i} moved when embedded alone"


def test_text_generation_is_refused_naming_the_architecture(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    for model in (MODEL, NOMIC):
        proc = subprocess.run([FERROX, "run", "-m", str(model), "-p", "hi", "-n", "1", "-t", "1"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode != 0
        assert "'general.architecture'" in proc.stderr and "non-causal" in proc.stderr, proc.stderr
