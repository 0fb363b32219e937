"""Reranking against llama.cpp (issue 38 item 3): tiny Qwen3-Reranker-shaped models
(tests/model/embedding_models.py: `qwen3` with pooling rank, labels yes/no, a random
head `cls.output.weight`, with and without the rerank template) scored by `ferrox serve`'s
/v1/rerank and by llama.cpp (llama-cpp-python, Llama(embedding=True) with the file's rank
pooling: each pair formed as llama-server's format_prompt_rerank forms it, decoded alone,
llama_get_embeddings_seq's first of n_cls_out floats, as llama-server's send_rerank reads).

Each score is p(yes) = softmax(head . last row)[0]; the test compares the yes-no logit
log(p / (1 - p)), which is linear in the hidden row: its error relative to the RMS of
llama.cpp's must be <= 1e-2 and the order of the documents the same wherever llama.cpp's
scores are apart by more than the error allows. A head with its label rows swapped (a
fault: every score becomes 1 - p) must fail that comparison. Skipped visibly when
llama-cpp-python is absent."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import llama_ref

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "model"))
sys.path.insert(0, str(HERE.parents[0] / "server"))
from embedding_models import RERANK_TEMPLATE, base_missing, make_reranker_model  # noqa: E402
from conftest import running  # noqa: E402  (tests/server's: a `ferrox serve` on loopback)

llama_cpp = llama_ref.require_llama_cpp()
if (why := base_missing()) is not None:
    pytest.skip(why, allow_module_level=True)

MAX_RELATIVE = 1e-2
RNG = np.random.default_rng(3301)
WORDS = ("the a river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper "
         "north glass signal tide").split()
QUERY = "where does the river meet the stone harbor"
DOCUMENTS = [" ".join(RNG.choice(WORDS, n)) for n in (1, 3, 7, 12, 25, 40, 5, 18)] + ["Hello, world!"]


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p / (1 - p))


def ferrox_scores(model: pathlib.Path) -> np.ndarray:
    with running("--parallel", "4", "-c", "512", model=str(model)) as s:
        status, body = s.post("/v1/rerank", {"query": QUERY, "documents": DOCUMENTS})
    assert status == 200, body
    scores = np.zeros(len(DOCUMENTS))
    for r in body["results"]:
        scores[r["index"]] = r["relevance_score"]
    return scores


def pair_tokens(llm, query: str, doc: str, template: bool) -> list[int]:
    if template:
        prompt = RERANK_TEMPLATE.replace("{query}", query).replace("{document}", doc)
        return llm.tokenize(prompt.encode(), add_bos=False, special=True)
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    bos = [llm.token_bos()] if llama_cpp.llama_vocab_get_add_bos(vocab) else []
    eos = [llm.token_eos()] if llama_cpp.llama_vocab_get_add_eos(vocab) else []
    return (bos + llm.tokenize(query.encode(), add_bos=False, special=False) + eos
            + llm.tokenize(doc.encode(), add_bos=False, special=False) + eos)


def llama_scores(model: pathlib.Path, template: bool) -> tuple[np.ndarray, list[int]]:
    llm = llama_cpp.Llama(model_path=str(model), embedding=True, n_ctx=512, n_batch=512,
                          n_ubatch=512, n_threads=2, verbose=False, type_k=0, type_v=0)
    assert llm.pooling_type() == llama_cpp.LLAMA_POOLING_TYPE_RANK
    n_out = llama_cpp.llama_model_n_cls_out(llm._model.model)
    scores, counts = [], []
    for doc in DOCUMENTS:
        tokens = pair_tokens(llm, QUERY, doc, template)
        llm._ctx.kv_cache_clear()
        llm._batch.reset()
        llm._batch.add_sequence(tokens, 0, True)
        llm._ctx.decode(llm._batch)
        ptr = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, 0)
        scores.append([ptr[i] for i in range(n_out)][0])
        counts.append(len(tokens))
    return np.array(scores), counts


def compare(got: np.ndarray, want: np.ndarray) -> tuple[float, int]:
    """The yes-no logit's error relative to llama.cpp's RMS, and how many document pairs
    llama.cpp orders clearly (apart by more than that error allows) that ferrox orders
    the other way."""
    lg, lw = logit(got), logit(want)
    scale = float(np.sqrt(np.mean(lw ** 2)))
    rel = float(np.max(np.abs(lg - lw)) / scale)
    margin = 2 * MAX_RELATIVE * scale
    flips = sum(1 for i in range(len(lw)) for j in range(len(lw))
                if lw[i] - lw[j] > margin and lg[i] <= lg[j])
    return rel, flips


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("rerank_parity")
    return {"template": make_reranker_model(d), "plain": make_reranker_model(d, template=False),
            "swapped": make_reranker_model(d, swap_labels=True)}


@pytest.mark.parametrize("variant", ["template", "plain"])
def test_rerank_scores_match_llama_cpp(models, variant):
    want, counts = llama_scores(models[variant], variant == "template")
    got = ferrox_scores(models[variant])
    rel, flips = compare(got, want)
    print(f"\n{variant}: tokens {counts}\n  ferrox {np.round(got, 6).tolist()}\n"
          f"  llama  {np.round(want, 6).tolist()}\n  max |d logit| / rms {rel:.2e}, "
          f"flips {flips}, max |d p| {np.abs(got - want).max():.2e}")
    assert len(set(np.round(want, 3))) > 3, "the scores barely differ: the test would not see a fault"
    assert rel <= MAX_RELATIVE, f"yes-no logits differ by {rel:.2e} of their RMS"
    assert flips == 0


def test_a_head_with_swapped_labels_fails_the_comparison(models):
    want, _ = llama_scores(models["template"], True)
    got = ferrox_scores(models["swapped"])
    rel, flips = compare(got, want)
    print(f"\nswapped head: max |d logit| / rms {rel:.2e}, flips {flips}")
    assert rel > MAX_RELATIVE and flips > 0
