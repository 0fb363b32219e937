"""Non-causal embedding encoders against llama.cpp (issue 38 item 3): tiny-gemma-embedding
(tests/model/make_tiny_models.py, EMBEDDING: EmbeddingGemma's layout -- gemma3's layers
attending both ways, a symmetric window on layer 0, mean pooling, dense projections)
embedded by `ferrox embed` (all inputs in one call: several sequences share each decode) and
by llama.cpp (llama-cpp-python's Llama(embedding=True).embed, one input a call, normalised).
Every input's vectors must agree to cosine >= 0.9999 and the token counts must match.

The comparison must catch the faults a pass could have: llama.cpp on the same weights
without the dense projections (tiny-gemma-embedding-nodense), and llama.cpp attending
causally over the same weights must each leave some input below the bound. llama.cpp runs
every cacheless (encoder) graph non-causally whatever the context asks, so the causal
reference is the nodense file renamed to `gemma3` (the same layers, causal, with a causal
window), against ferrox on the nodense file (which must itself agree with llama.cpp's); and
llama.cpp with layer 0's symmetric window one position narrower or wider on each side
(sliding_window 6 or 10 for 8) must fail too.
Skipped visibly when llama-cpp-python or the tiny models are absent."""
from __future__ import annotations

import os
import pathlib
import sys

import numpy as np
import pytest

import llama_ref

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from embedding_models import rename_architecture, set_u32_key  # noqa: E402

llama_cpp = llama_ref.require_llama_cpp()
FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))
MODEL = TINY / "tiny-gemma-embedding.gguf"
NODENSE = TINY / "tiny-gemma-embedding-nodense.gguf"
if not MODEL.exists() or not NODENSE.exists():
    pytest.skip(f"{MODEL} or {NODENSE.name} is absent (tests/model/make_tiny_models.py makes them)",
                allow_module_level=True)

MIN_COSINE = 0.9999
RNG = np.random.default_rng(38035)
WORDS = llama_ref.EMBED_WORDS
# Short and long: the long ones cross layer 0's window (8: p-4..p+4) many times and take the
# CPU plugin's panel GEMM (more than 16 rows).
TEXTS = [" ".join(RNG.choice(WORDS, n)) for n in (1, 3, 9, 23, 60, 140)] + ["Hello, world!"]


def ferrox_vectors(model: pathlib.Path) -> np.ndarray:
    return llama_ref.ferrox_embed_vectors(FERROX, model, TEXTS)


def llama_vectors(model: pathlib.Path) -> tuple[np.ndarray, list[int]]:
    return llama_ref.llama_embed_vectors(llama_cpp, model, TEXTS)


def check_agree(name: str, got: np.ndarray, want: np.ndarray, counts: list[int]) -> None:
    # The long inputs cross layer 0's window as well.
    llama_ref.check_vectors_agree(name, got, want, counts, MIN_COSINE)








@pytest.fixture(scope="module")
def got() -> dict[str, np.ndarray]:
    return {"dense": ferrox_vectors(MODEL), "nodense": ferrox_vectors(NODENSE)}


def test_gemma_embedding_matches_llama_cpp(got):
    check_agree("gemma-embedding", got["dense"], *llama_vectors(MODEL))


def test_gemma_embedding_without_projections_matches_llama_cpp(got):
    check_agree("gemma-embedding-nodense", got["nodense"], *llama_vectors(NODENSE))


def test_dropped_projections_are_caught(got):
    want, _ = llama_vectors(NODENSE)
    c = llama_ref.cosines(got["dense"], want)
    print(f"\nwithout the projections: cosines {np.round(c, 5).tolist()}")
    assert c.min() < MIN_COSINE, f"dropped projections went unnoticed: cosines {c.tolist()}"


def test_causal_attention_is_caught(got, tmp_path):
    causal = tmp_path / "tiny-gemma-embedding-as-gemma3.gguf"
    causal.write_bytes(rename_architecture(NODENSE.read_bytes(), "gemma3"))
    want, _ = llama_vectors(causal)
    c = llama_ref.cosines(got["nodense"], want)
    print(f"\ncausal reference: cosines {np.round(c, 5).tolist()}")
    assert c.min() < MIN_COSINE, f"causal attention went unnoticed: cosines {c.tolist()}"


@pytest.mark.parametrize("window", [6, 10])
def test_a_window_one_position_off_is_caught(got, tmp_path, window):
    shifted = tmp_path / f"tiny-gemma-embedding-window{window}.gguf"
    shifted.write_bytes(set_u32_key(NODENSE.read_bytes(), "gemma-embedding.attention.sliding_window", window))
    want, _ = llama_vectors(shifted)
    c = llama_ref.cosines(got["nodense"], want)
    print(f"\nwindow {window} for 8: cosines {np.round(c, 6).tolist()}")
    assert c.min() < MIN_COSINE, f"a window of {window} went unnoticed: cosines {c.tolist()}"
