"""BERT rerankers against llama.cpp (issue 38 item 3): tiny-bert-rerank (tests/model/
tiny_catalogue.py BERT_RERANK: bge-reranker's layout as llama.cpp runs it -- `bert` with
pooling rank, the CLS row through the sequence classifier's cls.weight, cls.bias and tanh, then
cls.output.weight and cls.output.bias) scored by the real `ferrox serve` on /v1/rerank and by
llama.cpp (llama-cpp-python, Llama(embedding=True) with the file's rank pooling: each pair
formed as llama-server's format_prompt_rerank forms it from the vocabulary's add_bos / add_eos /
add_sep flags, decoded alone, the first of llama_get_embeddings_seq's n_cls_out floats, as
llama-server's send_rerank reads it).

The scores are the head's raw outputs (no softmax for bert): the largest difference relative to
the RMS of llama.cpp's must be <= MAX_RELATIVE, no pair of documents llama.cpp orders clearly
may be ordered the other way, and the tokens of all pairs (the answer's usage) must be as many
as llama.cpp's. Two pair formations run: the bge vocabulary's defaults ([CLS] query [SEP]
document) and tokenizer.ggml.add_eos_token set (XLM-RoBERTa's converter: [CLS] query [SEP]
[SEP] document [SEP]). A pass that left cls.bias out (llama.cpp on tiny-bert-rerank-nobias) and
one that joined the pair the other way (llama.cpp's add_eos pairs against ferrox's default
ones) must fail the comparison. A rank file without cls.output.weight, or with a cls.weight of
the wrong size, is refused naming the tensor. Skipped visibly when llama-cpp-python or the tiny models are
absent."""
from __future__ import annotations

import os
import pathlib
import sys

import numpy as np
import pytest

import llama_ref

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "server"))
from conftest import running  # noqa: E402  (tests/server's: a `ferrox serve` on loopback)

llama_cpp = llama_ref.require_llama_cpp()
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))
MODELS = {name: TINY / f"tiny-{name}.gguf" for name in ("bert-rerank", "bert-rerank-nobias", "bert-rerank-eos")}
if not all(p.exists() for p in MODELS.values()):
    pytest.skip(f"{MODELS['bert-rerank']} or its variants are absent (tests/model/make_tiny_models.py makes "
                "them)", allow_module_level=True)

MAX_RELATIVE = 1e-4
RNG = np.random.default_rng(3903)
WORDS = llama_ref.EMBED_WORDS
QUERY = "where does the river meet the stone harbor"
# Short and long pairs (past 16 tokens the CPU plugin multiplies with its panel GEMM).
DOCUMENTS = [" ".join(RNG.choice(WORDS, n)) for n in (1, 3, 7, 12, 25, 40, 5, 18, 60)] + ["Hello, world!"]


def ferrox_scores(model: pathlib.Path) -> tuple[np.ndarray, int]:
    """/v1/rerank's relevance_score per document (in request order) and usage.prompt_tokens."""
    with running("--parallel", "4", "-c", "512", model=str(model)) as s:
        status, body = s.post("/v1/rerank", {"query": QUERY, "documents": DOCUMENTS})
    assert status == 200, body
    scores = np.zeros(len(DOCUMENTS))
    for r in body["results"]:
        scores[r["index"]] = r["relevance_score"]
    return scores, body["usage"]["prompt_tokens"]


def pair_tokens(llm, query: str, doc: str) -> list[int]:
    """llama-server's pair without a rerank template: [BOS] query [EOS] [SEP] doc [EOS], each
    where the vocabulary's flag says, SEP standing in for an absent EOS."""
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    eos = llama_cpp.llama_vocab_eos(vocab)
    if eos == -1:
        eos = llama_cpp.llama_vocab_sep(vocab)
    add_eos = [eos] if llama_cpp.llama_vocab_get_add_eos(vocab) else []
    bos = [llama_cpp.llama_vocab_bos(vocab)] if llama_cpp.llama_vocab_get_add_bos(vocab) else []
    sep = [llama_cpp.llama_vocab_sep(vocab)] if llama_cpp.llama_vocab_get_add_sep(vocab) else []
    return (bos + llm.tokenize(query.encode(), add_bos=False, special=False) + add_eos + sep
            + llm.tokenize(doc.encode(), add_bos=False, special=False) + add_eos)


def llama_scores(model: pathlib.Path) -> tuple[np.ndarray, list[int]]:
    llm = llama_cpp.Llama(model_path=str(model), embedding=True, n_ctx=512, n_batch=512,
                          n_ubatch=512, n_threads=2, verbose=False, type_k=0, type_v=0)
    assert llm.pooling_type() == llama_cpp.LLAMA_POOLING_TYPE_RANK
    n_out = llama_cpp.llama_model_n_cls_out(llm._model.model)
    assert n_out == 1, n_out
    scores, counts = [], []
    for doc in DOCUMENTS:
        tokens = pair_tokens(llm, QUERY, doc)
        llm._ctx.kv_cache_clear()
        llm._batch.reset()
        llm._batch.add_sequence(tokens, 0, True)
        llm._ctx.decode(llm._batch)
        ptr = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, 0)
        scores.append(ptr[0])
        counts.append(len(tokens))
    return np.array(scores), counts


def compare(got: np.ndarray, want: np.ndarray) -> tuple[float, int]:
    """The largest score difference relative to llama.cpp's RMS, and how many document pairs
    llama.cpp orders clearly (apart by more than that bound allows) that ferrox orders the other
    way."""
    scale = float(np.sqrt(np.mean(want ** 2)))
    rel = float(np.max(np.abs(got - want)) / scale)
    margin = 2 * MAX_RELATIVE * scale
    flips = sum(1 for i in range(len(want)) for j in range(len(want))
                if want[i] - want[j] > margin and got[i] <= got[j])
    return rel, flips


@pytest.fixture(scope="module")
def got() -> dict[str, tuple[np.ndarray, int]]:
    return {name: ferrox_scores(MODELS[name]) for name in ("bert-rerank", "bert-rerank-eos")}


@pytest.fixture(scope="module")
def want() -> dict[str, tuple[np.ndarray, list[int]]]:
    return {name: llama_scores(path) for name, path in MODELS.items()}


@pytest.mark.parametrize("name", ["bert-rerank", "bert-rerank-eos"])
def test_bert_rerank_scores_match_llama_cpp(got, want, name):
    (scores, tokens), (ref, counts) = got[name], want[name]
    rel, flips = compare(scores, ref)
    print(f"\n{name}: tokens {counts}\n  ferrox {np.round(scores, 6).tolist()}\n"
          f"  llama  {np.round(ref, 6).tolist()}\n  max |d| / rms {rel:.2e}, flips {flips}")
    assert tokens == sum(counts), f"ferrox decoded {tokens} tokens for the pairs, llama.cpp {sum(counts)}"
    assert len(set(np.round(ref, 3))) > 5, "the scores barely differ: the test would not see a fault"
    assert rel <= MAX_RELATIVE, f"scores differ by {rel:.2e} of their RMS"
    assert flips == 0


def test_the_two_pair_formations_differ(want):
    """[CLS] q [SEP] d against [CLS] q [SEP] [SEP] d [SEP]: two tokens more a pair, and scores
    apart -- so the test above tells them apart."""
    (plain, plain_counts), (eos, eos_counts) = want["bert-rerank"], want["bert-rerank-eos"]
    assert [c + 2 for c in plain_counts] == eos_counts
    rel, _ = compare(plain, eos)
    print(f"\nadd_eos pairs against the default ones: max |d| / rms {rel:.2e}")
    assert rel > MAX_RELATIVE


def test_a_classifier_without_its_bias_is_caught(got, want):
    rel, flips = compare(got["bert-rerank"][0], want["bert-rerank-nobias"][0])
    print(f"\nwithout cls.bias: max |d| / rms {rel:.2e}, flips {flips}")
    assert rel > MAX_RELATIVE and flips > 0


def test_a_bert_rerank_file_with_a_missing_or_misshapen_head_is_refused_naming_the_tensor(tmp_path):
    """tiny-bert-rerank's options without cls.output.weight, and with a cls.weight of 128
    values for 128 x 128 (the generator's drop / extra hooks; written into a temporary
    folder)."""
    import subprocess

    sys.path.insert(0, str(HERE.parents[0] / "model"))
    import make_tiny_models  # noqa: E402
    from tiny_catalogue import BERT_RERANK  # noqa: E402

    arch, vocab, opt = BERT_RERANK["bert-rerank"]
    headless = make_tiny_models.make(arch, tmp_path, 3900, "bert-rerank-headless", vocab,
                                     {**opt, "drop": ("cls.output.weight",)})
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    ferrox = os.environ["FERROX_BIN"]
    proc = subprocess.run([ferrox, "embed", "-m", str(headless), "-p", "x", "-t", "1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "'cls.output.weight' is missing" in proc.stderr, proc.stderr
    assert "'bert.pooling_type' is rank" in proc.stderr, proc.stderr
    short = make_tiny_models.make(arch, tmp_path, 3900, "bert-rerank-short", vocab,
                                  {**opt, "drop": ("cls.weight",), "extra": "cls.weight"})
    proc = subprocess.run([ferrox, "embed", "-m", str(short), "-p", "x", "-t", "1"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0 and "'cls.weight' has 128 elements, expected 16384" in proc.stderr, proc.stderr


def test_a_pair_past_the_learned_positions_is_a_400_naming_the_document():
    """tiny-bert-rerank learns 256 positions (bert.context_length): with -c 1024 a pair of 257
    tokens or more is refused before the engine sees it, naming the document and the bound; the
    longest pair that fits is scored."""
    with running("--parallel", "2", "-c", "1024", model=str(MODELS["bert-rerank"])) as s:
        status, body = s.post("/v1/rerank", {"query": "river", "documents": ["stone", "river " * 300]})
        assert status == 400, body
        assert body["error"]["param"] == "/documents/1" and "at most 256" in body["error"]["message"], body
        # [CLS] river [SEP] + 253 words: 256 tokens.
        status, body = s.post("/v1/rerank", {"query": "river", "documents": ["stone " * 253]})
        assert status == 200 and body["usage"]["prompt_tokens"] == 256, body


UGM_MODEL = TINY / "tiny-bert-rerank-ugm.gguf"


def test_a_reranker_with_a_unigram_vocabulary_matches_llama_cpp():
    """tiny-bert-rerank-ugm (tiny_catalogue.py BERT_UGM): bge-reranker-v2-m3's shape of file --
    the rank head over a SentencePiece unigram vocabulary (tokenizer.ggml.model t5, an nmt_nfkc
    charsmap, XLM-RoBERTa's ids and flags), pairs joined as <s> q </s> </s> d </s>."""
    if not UGM_MODEL.exists():
        pytest.skip(f"{UGM_MODEL} is absent (tests/model/make_tiny_models.py makes it; needs sentencepiece)")
    (scores, tokens), (ref, counts) = ferrox_scores(UGM_MODEL), llama_scores(UGM_MODEL)
    rel, flips = compare(scores, ref)
    print(f"\nbert-rerank-ugm: tokens {counts}\n  ferrox {np.round(scores, 6).tolist()}\n"
          f"  llama  {np.round(ref, 6).tolist()}\n  max |d| / rms {rel:.2e}, flips {flips}")
    assert tokens == sum(counts), f"ferrox decoded {tokens} tokens for the pairs, llama.cpp {sum(counts)}"
    assert len(set(np.round(ref, 3))) > 5, "the scores barely differ: the test would not see a fault"
    assert rel <= MAX_RELATIVE, f"scores differ by {rel:.2e} of their RMS"
    assert flips == 0
