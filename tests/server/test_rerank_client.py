"""POST /v1/rerank (issue 38 item 3) through httpx, a real HTTP client, against
`ferrox serve` on loopback with a tiny Qwen3-Reranker-shaped model
(tests/model/embedding_models.py: qwen3, pooling rank, a yes/no head, the rerank
template); llama.cpp's scores are tests/parity/test_rerank_parity.py's:

- results are every document once, by descending relevance_score (probabilities),
  top_n of them, with the document's text when return_documents (strings and
  {"text"} objects alike); /rerank, /v1/reranking and /reranking answer the same;
- a document's score does not depend on the others in its request, nor on requests
  sent at the same time (the embedder batches them);
- bad input is a 400 naming the JSON pointer, sizes are bounded; a reranker refuses
  /v1/embeddings and chat, an embedding model refuses /v1/rerank, a rank file
  without its head is refused naming the tensor."""
from __future__ import annotations

import concurrent.futures
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import FERROX, running

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from embedding_models import base_missing, make_embedding_model, make_reranker_model  # noqa: E402

httpx = pytest.importorskip("httpx")
if (why := base_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

RNG = np.random.default_rng(3302)
WORDS = "river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper".split()
QUERY = "a lantern by the harbor"
DOCS = [" ".join(RNG.choice(WORDS, n)) for n in (2, 6, 11, 30, 3, 17, 8, 1)]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("rerank_server")
    return {"rerank": make_reranker_model(d), "headless": make_reranker_model(d, head=False),
            "embed": make_embedding_model(d, "last")}


@pytest.fixture(scope="module")
def server(models):
    with running("--parallel", "4", "-c", "1024", model=str(models["rerank"])) as s:
        yield s


def rerank(server, body: dict, path: str = "/v1/rerank") -> dict:
    r = httpx.post(server.base + path, json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def by_index(reply: dict) -> dict[int, float]:
    return {r["index"]: r["relevance_score"] for r in reply["results"]}


def test_results_are_sorted_cut_and_carry_documents(server):
    full = rerank(server, {"model": "x", "query": QUERY, "documents": DOCS})
    scores = [r["relevance_score"] for r in full["results"]]
    assert sorted(r["index"] for r in full["results"]) == list(range(len(DOCS)))
    assert scores == sorted(scores, reverse=True)
    assert all(0 < s < 1 for s in scores) and len(set(scores)) == len(DOCS)
    assert "document" not in full["results"][0]
    assert full["object"] == "list" and full["usage"]["prompt_tokens"] > 0
    assert full["usage"]["total_tokens"] == full["usage"]["prompt_tokens"]
    objects = [{"text": d} for d in DOCS]
    top = rerank(server, {"query": QUERY, "documents": objects, "top_n": 3, "return_documents": True})
    assert top["results"] == [{**r, "document": {"text": DOCS[r["index"]]}} for r in full["results"][:3]]
    for path in ("/rerank", "/v1/reranking", "/reranking"):
        assert rerank(server, {"query": QUERY, "documents": DOCS}, path)["results"] == full["results"]


def test_a_score_does_not_depend_on_the_other_documents_or_requests(server):
    together = by_index(rerank(server, {"query": QUERY, "documents": DOCS}))
    alone = [by_index(rerank(server, {"query": QUERY, "documents": [d]}))[0] for d in DOCS]
    assert alone == [together[i] for i in range(len(DOCS))]
    with concurrent.futures.ThreadPoolExecutor(len(DOCS)) as pool:
        at_once = list(pool.map(
            lambda d: by_index(rerank(server, {"query": QUERY, "documents": [d]}))[0], DOCS))
    assert at_once == alone
    # A fault this test must see: another query scores the same documents otherwise.
    other = by_index(rerank(server, {"query": "copper orbit", "documents": DOCS}))
    assert [other[i] for i in range(len(DOCS))] != alone


@pytest.mark.parametrize("body,pointer", [
    ({"documents": ["a"]}, "'/query'"),
    ({"query": 3, "documents": ["a"]}, "'/query'"),
    ({"query": "q"}, "'/documents'"),
    ({"query": "q", "documents": []}, "'/documents'"),
    ({"query": "q", "documents": "a"}, "'/documents'"),
    ({"query": "q", "documents": ["a", 7]}, "'/documents/1'"),
    ({"query": "q", "documents": ["a", {"text": 3}]}, "'/documents/1/text'"),
    ({"query": "q", "documents": ["a", {"title": "x"}]}, "'/documents/1/text'"),
    ({"query": "q", "documents": ["a"] * 1001}, "'/documents'"),
    ({"query": "q", "documents": ["ok", " ".join(["river"] * 1100)]}, "'/documents/1'"),
    ({"query": "q", "documents": ["a"], "top_n": 0}, "'/top_n'"),
    ({"query": "q", "documents": ["a"], "top_n": "2"}, "'/top_n'"),
    ({"query": "q", "documents": ["a"], "return_documents": "yes"}, "'/return_documents'"),
    ({"query": "q", "documents": ["a"], "rank_fields": ["text"]}, "'rank_fields'"),
])
def test_bad_input_is_a_400_naming_the_field(server, body, pointer):
    status, reply = server.post("/v1/rerank", body)
    assert status == 400, reply
    assert pointer in reply["error"]["message"], reply


def test_each_model_refuses_the_other_kinds_of_endpoint(server, models):
    status, reply = server.post("/v1/embeddings", {"input": "hi"})
    assert status == 400 and "is a reranking model" in reply["error"]["message"], reply
    status, reply = server.post("/v1/chat/completions",
                                {"messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and "is a reranking model" in reply["error"]["message"], reply
    with running("--parallel", "1", "-c", "256", model=str(models["embed"])) as s:
        status, reply = s.post("/v1/rerank", {"query": "q", "documents": ["a"]})
    assert status == 400 and "not a reranking model" in reply["error"]["message"], reply


def test_a_rank_file_without_its_head_is_refused_naming_the_tensor(models):
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    proc = subprocess.run([FERROX, "embed", "-m", str(models["headless"]), "-p", "x", "-t", "1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "'cls.output.weight' is missing" in proc.stderr, proc.stderr
    proc = subprocess.run([FERROX, "embed", "-m", str(models["rerank"]), "-p", "x", "-t", "1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "/v1/rerank" in proc.stderr, proc.stderr
