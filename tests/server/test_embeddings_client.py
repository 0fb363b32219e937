"""POST /v1/embeddings (issue 38 item 3) through the official `openai` client, on a
tiny qwen3 embedding model (last pooling; tests/model/embedding_models.py):

- floats and base64 (little-endian float32, decoded here with numpy) carry the same
  vectors, and those are `ferrox embed`'s to the bit (same pooling, same
  normalisation, batch-invariant rows);
- usage.prompt_tokens counts the tokens /tokenize gives; token-id input embeds as
  the same text does;
- concurrent requests, batched together by the server, get the vectors each gets alone;
- `dimensions` is refused by name unless --embedding-truncation, then cuts and renormalises;
- bad input is a 400 naming the JSON pointer; a chat model refuses /v1/embeddings
  and the embedding model refuses /v1/chat/completions, each saying why."""
from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import FERROX, running

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from embedding_models import base_missing, make_embedding_model  # noqa: E402

openai = pytest.importorskip("openai")
if (why := base_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

RNG = np.random.default_rng(3803)
WORDS = "river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper".split()
TEXTS = [" ".join(RNG.choice(WORDS, n)) for n in (2, 6, 11, 30, 3, 17, 8, 1)]


def client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("embedding_server")
    return {p: make_embedding_model(d, p) for p in ("last", "none")}


@pytest.fixture(scope="module")
def server(models):
    with running("--parallel", "4", "-c", "1024", model=str(models["last"])) as s:
        yield s


def cli_vectors(model: pathlib.Path, texts: list[str]) -> list[list[float]]:
    cmd = [FERROX, "embed", "-m", str(model), "-t", "2", "--json"]
    for t in texts:
        cmd += ["-p", t]
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_floats_and_base64_carry_the_cli_vectors(server, models):
    c = client(server)
    floats = c.embeddings.create(model="x", input=TEXTS, encoding_format="float")
    assert [d.index for d in floats.data] == list(range(len(TEXTS)))
    got = [d.embedding for d in floats.data]
    assert got == cli_vectors(models["last"], TEXTS)
    b64 = c.embeddings.create(model="x", input=TEXTS, encoding_format="base64")
    decoded = [np.frombuffer(base64.b64decode(d.embedding), dtype="<f4").tolist() for d in b64.data]
    assert decoded == got
    np.testing.assert_allclose(np.linalg.norm(np.array(got), axis=1), 1.0, atol=1e-6)
    # The client's own default (it asks for base64 and decodes it).
    assert [d.embedding for d in c.embeddings.create(model="x", input=TEXTS[:2]).data] == got[:2]


def test_usage_counts_the_tokens_and_token_input_equals_text(server):
    c = client(server)
    ids = []
    for t in TEXTS[:3]:
        status, body = server.post("/tokenize", {"content": t, "add_special": True})
        assert status == 200, body
        ids.append(body["tokens"])
    r = c.embeddings.create(model="x", input=TEXTS[:3], encoding_format="float")
    assert r.usage.prompt_tokens == sum(map(len, ids)) == r.usage.total_tokens
    by_ids = c.embeddings.create(model="x", input=ids, encoding_format="float")
    assert [d.embedding for d in by_ids.data] == [d.embedding for d in r.data]
    one = c.embeddings.create(model="x", input=ids[1], encoding_format="float")
    assert one.data[0].embedding == r.data[1].embedding


def test_concurrent_requests_get_the_vectors_each_gets_alone(server):
    c = client(server)
    alone = [c.embeddings.create(model="x", input=t, encoding_format="float").data[0].embedding
             for t in TEXTS]
    with concurrent.futures.ThreadPoolExecutor(len(TEXTS)) as pool:
        together = list(pool.map(
            lambda t: c.embeddings.create(model="x", input=t, encoding_format="float").data[0].embedding,
            TEXTS))
    assert together == alone


def test_dimensions_are_refused_unless_the_server_allows_truncation(server, models):
    with pytest.raises(openai.BadRequestError) as e:
        client(server).embeddings.create(model="x", input="hi", dimensions=32)
    assert "'/dimensions'" in str(e.value) and "--embedding-truncation" in str(e.value)
    # The full length is always allowed.
    full = client(server).embeddings.create(model="x", input=TEXTS[2], dimensions=128,
                                            encoding_format="float").data[0].embedding
    with running("--parallel", "2", "-c", "256", "--embedding-truncation", model=str(models["last"])) as s:
        cut = client(s).embeddings.create(model="x", input=TEXTS[2], dimensions=32,
                                          encoding_format="float").data[0].embedding
    assert len(cut) == 32
    prefix = np.array(full[:32])
    np.testing.assert_allclose(cut, prefix / np.linalg.norm(prefix), atol=1e-6)


@pytest.mark.parametrize("body,pointer", [
    ({"input": ["fine", ""]}, "'/input/1'"),
    ({"input": []}, "'/input'"),
    ({"input": ["x"] * 2049}, "'/input'"),
    ({"input": [[1, 2, 10 ** 9]]}, "'/input/0/2'"),
    ({"input": [{"text": "x"}]}, "'/input/0'"),
    ({"input": " ".join(["river"] * 1100)}, "'/input'"),
    ({"input": "x", "encoding_format": "int8"}, "'/encoding_format'"),
    ({"input": "x", "dimensions": 0}, "'/dimensions'"),
    ({"input": "x", "dimensions": 4096}, "'/dimensions'"),
    ({"input": "x", "truncate": True}, "'truncate'"),
    ({}, "'/input'"),
])
def test_bad_input_is_a_400_naming_the_field(server, body, pointer):
    status, reply = server.post("/v1/embeddings", body)
    assert status == 400, reply
    assert pointer in reply["error"]["message"], reply


def test_each_model_refuses_the_other_kind_of_endpoint(server, models):
    status, reply = server.post("/v1/chat/completions",
                                {"model": "x", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and "is an embedding model" in reply["error"]["message"], reply
    with running("--parallel", "1", "-c", "256", model=str(models["none"])) as s:
        status, reply = s.post("/v1/embeddings", {"model": "x", "input": "hi"})
    assert status == 400 and "not an embedding model" in reply["error"]["message"], reply


ENCODER = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models")) \
    / "tiny-gemma-embedding.gguf"


@pytest.mark.skipif(not ENCODER.exists(), reason=f"{ENCODER} is absent (make_tiny_models.py)")
def test_a_non_causal_encoder_serves_the_cli_vectors_and_no_chat():
    """tiny-gemma-embedding (EmbeddingGemma's layout: non-causal, mean pooling, dense
    projections): concurrent requests batched by the server get `ferrox embed`'s vectors to
    the bit; chat is refused (a non-causal model gives no next token)."""
    want = cli_vectors(ENCODER, TEXTS)
    with running("--parallel", "4", "-c", "1024", model=str(ENCODER)) as s:
        c = client(s)
        with concurrent.futures.ThreadPoolExecutor(len(TEXTS)) as pool:
            together = list(pool.map(
                lambda t: c.embeddings.create(model="x", input=t, encoding_format="float").data[0].embedding,
                TEXTS))
        assert together == want
        assert [d.embedding for d in c.embeddings.create(model="x", input=TEXTS,
                                                         encoding_format="float").data] == want
        status, reply = s.post("/v1/chat/completions",
                               {"model": "x", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and "embedding model" in reply["error"]["message"], reply
