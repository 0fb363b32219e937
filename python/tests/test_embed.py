"""Model.embed / create_embedding (ferrox_embed) on tiny qwen3 embedding models
(tests/model/embedding_models.py), against the `ferrox embed` CLI's vectors for
the same texts, and an input's vector alone against the same input among others."""
from __future__ import annotations

import json
import math
import sys

import pytest

import ferrox
from conftest import REPO, cli, random_text

sys.path.insert(0, str(REPO / "tests" / "model"))
from embedding_models import base_missing, make_embedding_model  # noqa: E402

if (why := base_missing()) is not None:
    pytest.skip(why, allow_module_level=True)


@pytest.fixture(scope="module")
def model_paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("embedding_models")
    return {p: make_embedding_model(d, p) for p in ("last", "mean", "none")}


def cli_vectors(path, texts, *flags):
    args = ["embed", "-m", str(path), "-t", "2", "--json", *flags]
    for t in texts:
        args += ["-p", t]
    return json.loads(cli(*args).stdout)


@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_embed_gives_the_cli_vectors(model_paths, pooling, rng):
    texts = [random_text(rng, n) for n in (3, 9, 20)]
    with ferrox.Model(model_paths[pooling], embedding=True, n_seq_max=2, n_threads=2) as model:
        assert model.pooling == pooling
        one = model.embed(texts[0])
        assert len(one) == model.n_embd
        assert math.isclose(math.fsum(v * v for v in one), 1.0, rel_tol=1e-5)
        assert model.embed(texts) == cli_vectors(model_paths[pooling], texts)
        raw = model.embed(texts[1], normalize=False)
        assert raw == cli_vectors(model_paths[pooling], [texts[1]], "--normalize", "none")[0]
        assert abs(math.sqrt(math.fsum(v * v for v in raw)) - 1.0) > 1e-3


def test_an_input_embeds_the_same_alone_among_others_and_as_tokens(model_paths, rng):
    texts = [random_text(rng, n) for n in (4, 11, 2, 30, 7)]
    with ferrox.Model(model_paths["last"], embedding=True, n_seq_max=3, n_threads=2) as model:
        alone = [model.embed(t) for t in texts]
        # Five inputs over three sequences: two rounds, each input beside others.
        assert model.embed(texts) == alone
        assert model.embed(list(reversed(texts))) == list(reversed(alone))
        tokens = model.tokenize(texts[1])
        assert model.embed(tokens) == alone[1]
        assert model.embed([tokens, texts[2]]) == [alone[1], alone[2]]


def test_create_embedding_has_the_openai_shape(model_paths, rng):
    texts = [random_text(rng, 5), random_text(rng, 8)]
    with ferrox.Model(model_paths["mean"], embedding=True, n_threads=2) as model:
        doc = model.create_embedding(texts, model="tiny")
        assert doc["object"] == "list" and doc["model"] == "tiny"
        assert [d["index"] for d in doc["data"]] == [0, 1]
        assert [d["embedding"] for d in doc["data"]] == model.embed(texts)
        n = sum(len(model.tokenize(t)) for t in texts)
        assert doc["usage"] == {"prompt_tokens": n, "total_tokens": n}
        single = model.create_embedding(texts[0])
        assert len(single["data"]) == 1 and single["model"].endswith(".gguf")


def test_bad_inputs_are_refused_by_name(model_paths, rng):
    with pytest.raises(ferrox.InvalidArgumentError, match="pooling_type"):
        ferrox.Model(model_paths["last"])  # an embedding model without embedding=True
    with ferrox.Model(model_paths["last"], embedding=True, n_ctx=32, n_threads=2) as model:
        long = random_text(rng, 300)
        assert len(model.tokenize(long)) > 32
        with pytest.raises(ferrox.InvalidArgumentError, match=r"input 0 has \d+ tokens"):
            model.embed(long)
        assert model.embed(long, truncate=True) == model.embed(model.tokenize(long)[:32])
        with pytest.raises(ferrox.InvalidArgumentError, match="input is empty"):
            model.embed([])
        with pytest.raises(ferrox.InvalidArgumentError, match=r"input\[1\]"):
            model.embed([[1, 2], [model.n_vocab]])
        with pytest.raises(TypeError):
            model.embed(3.5)
    with ferrox.Model(model_paths["none"], embedding=True, n_threads=2) as chat_model:
        assert chat_model.pooling == "none"
        with pytest.raises(ferrox.InvalidArgumentError, match="not an embedding model"):
            chat_model.embed("a text")
