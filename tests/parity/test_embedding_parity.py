"""Embeddings against llama.cpp (issue 38 item 3): tiny qwen3 embedding models
(tests/model/embedding_models.py, Qwen3-Embedding's shape: `qwen3` with
`qwen3.pooling_type` last, mean or cls) embedded by `ferrox embed` and by
llama.cpp (llama-cpp-python's Llama(embedding=True).embed, which pools with the
file's pooling type, normalize=True: L2, as llama-embedding's default). Every
input's vectors must agree to cosine >= 0.9999, and the token counts must match
(the same tokens went in). The inputs mix short and long texts (more than the
16 rows the CPU plugin multiplies as MATVEC does, so the panel GEMM runs too).
Skipped visibly when llama-cpp-python is absent."""
from __future__ import annotations

import os
import pathlib
import sys

import numpy as np
import pytest

import llama_ref

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from embedding_models import base_missing, make_embedding_model  # noqa: E402

llama_cpp = llama_ref.require_llama_cpp()
FERROX = os.environ.get("FERROX_BIN", "")
if not FERROX or not pathlib.Path(FERROX).exists():
    pytest.skip("FERROX_BIN is not set to the built ferrox", allow_module_level=True)
if (why := base_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

MIN_COSINE = 0.9999
RNG = np.random.default_rng(38003)
WORDS = llama_ref.EMBED_WORDS
TEXTS = [" ".join(RNG.choice(WORDS, n)) for n in (1, 4, 9, 23, 60, 140)] + ["Hello, world!"]


def ferrox_vectors(model: pathlib.Path) -> np.ndarray:
    return llama_ref.ferrox_embed_vectors(FERROX, model, TEXTS)




@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("embedding_parity")
    return {p: make_embedding_model(d, p) for p in ("last", "mean", "cls")}


@pytest.mark.parametrize("pooling", ["last", "mean", "cls"])
def test_embeddings_match_llama_cpp(models, pooling):
    got = ferrox_vectors(models[pooling])
    want, counts = llama_ref.llama_embed_vectors(llama_cpp, models[pooling], TEXTS)
    llama_ref.check_vectors_agree(pooling, got, want, counts, MIN_COSINE, spread=False)
