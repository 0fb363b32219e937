"""ferrox's unigram tokenizer ("t5", llama.cpp's UGM) against SentencePiece and llama.cpp.

Small SentencePiece unigram models are trained here, with the `sentencepiece`
package, on seeded random multilingual text: one with the nmt_nfkc normaliser
(a non-trivial precompiled charsmap: full-width forms, ligatures, compatibility
characters folded), one with identity (no charsmap) and remove_extra_whitespaces
off, one that keeps every rule at its default but has user-defined symbols. Each is
written as a vocab-only GGUF the way llama.cpp's converter writes a T5 /
XLM-RoBERTa vocabulary (tokens, scores, token types, add_space_prefix,
remove_extra_whitespaces, precompiled_charsmap). Then, for seeded random strings
(accents, full-width forms, emoji, repeated spaces, newlines, characters the
model never saw), ferrox's ids must equal SentencePiece's own encode and
llama.cpp's (llama-cpp-python, vocab-only load), and decoding must give back
what SentencePiece decodes.

The test must be able to fail: the same strings through llama.cpp on a copy of
the nmt_nfkc vocabulary without its charsmap must differ from ferrox on the
original.
"""
from __future__ import annotations

import os
import pathlib
import random
import sys

import pytest

import llama_ref

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
import ugm_vocab  # noqa: E402

llama_cpp = llama_ref.require_llama_cpp()
spm = pytest.importorskip("sentencepiece", reason="pip install sentencepiece (ci/install-deps.sh)")
gguf = pytest.importorskip("gguf")

SEED = int(os.environ.get("FERROX_PARITY_SEED", "20261207"))
STRINGS = int(os.environ.get("FERROX_UGM_STRINGS", "400"))

# The test strings add characters the training text (ugm_vocab.TRAIN_POOLS) never
# has: unknown code points.
EXTRA_POOLS = [
    "\uff21\uff22\uff23\uff41\uff42\uff43\uff10\uff11\uff01\uff1f",  # full-width forms (NFKC folds them)
    "\ufb01\ufb02\u2460\u2461\u00bd\u2122\u00b2\u3000\u00a0",      # ligatures, circled, fractions, odd spaces
    "e\u0301a\u0308n\u0303o\u0302",                               # decomposed accents (NFKC composes)
    "\U0001f600\U0001f680\U0001f44d\u2764\ufe0f\U0001f1e9\U0001f1ea",  # emoji, never trained
    "\u0915\u0916\u0917\u0e01\u0e02\u10d0\u10d1\u0531",           # scripts never trained
    "\t\n\r\n", "   ",
]
# ASCII-led, as real files' are (T5's <extra_id_N>): llama.cpp's prefix match over
# user-defined tokens follows its trie as far as it goes, whole token or not, and
# passes those bytes through unnormalised; with a token led by a multi-byte
# character's lead byte that splits the character (ferrox follows SentencePiece).
USER_SYMBOLS = ["<sep>", "[MASK]"]


def sample_strings(rng: random.Random) -> list[str]:
    fixed = ["", " ", "   ", "\n", "Hello world", "  two  spaces  ", "\uff28\uff45\uff4c\uff4c\uff4f",
             "\ufb01ne caf\u00e9 cafe\u0301", "\U0001f600 emoji \U0001f600\U0001f600", "a\n\nb\tc",
             "<sep>x[MASK]y <sep> z", "\u0915\u0916 unknown \u10d0\u10d1"]
    out = list(fixed)
    for _ in range(STRINGS):
        parts = []
        for _ in range(rng.randint(1, 10)):
            kind = rng.random()
            if kind < 0.15:
                parts.append(rng.choice(" \n\t") * rng.randint(1, 5))
            elif kind < 0.45:
                parts.append(ugm_vocab.random_word(rng, EXTRA_POOLS))
            elif kind < 0.5:
                parts.append(rng.choice(USER_SYMBOLS))
            else:
                parts.append(ugm_vocab.random_word(rng, ugm_vocab.TRAIN_POOLS))
        out.append("".join(parts) if rng.random() < 0.5 else " ".join(parts))
    return out


CASES = {
    # name: (normalisation rule, remove_extra_whitespaces, user-defined symbols)
    "nmt_nfkc": ("nmt_nfkc", True, []),
    "identity": ("identity", False, []),
    "nfkc-user-defined": ("nmt_nfkc", True, USER_SYMBOLS),
}


@pytest.fixture(scope="module")
def tool():
    path = llama_ref.find_tool("ferrox_tokenize_tool", "FERROX_TOKENIZE_TOOL")
    if path is None or not path.exists():
        pytest.skip("ferrox_tokenize_tool is not built (build target ferrox_tokenize_tool)")
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ugm")
    out = {}
    for i, (name, (rule, remove_extra, symbols)) in enumerate(CASES.items()):
        model = ugm_vocab.train(SEED + i, rule, remove_extra, symbols)
        path = folder / f"{name}.gguf"
        ugm_vocab.write_vocab_only(model, path)
        out[name] = (model, path)
    return out


def sentencepiece_ids(sp, text: str) -> list[int]:
    """SentencePiece's ids with each run of unknown ids as one. SentencePiece cuts the
    text at U+2581 before its search, so unknown pieces on both sides of a space stay
    two ids; llama.cpp searches the whole text and merges the run (ferrox does too)."""
    out: list[int] = []
    for i in sp.encode(text):
        if not (i == sp.unk_id() and out and out[-1] == i):
            out.append(i)
    return out


def ferrox_ids(tool, path, texts, add_special=False):
    ferrox = llama_ref.FerroxTokenizer(tool, path)
    ids = [ferrox.encode(t.encode(), add_special, False) for t in texts]
    ferrox.close()
    return ids


@pytest.mark.parametrize("name", list(CASES))
def test_encode_matches_sentencepiece_and_llama_cpp(tool, models, name):
    model, path = models[name]
    sp = spm.SentencePieceProcessor(model_proto=model)
    reference = llama_ref.Reference(path)
    texts = sample_strings(random.Random(SEED))
    got = ferrox_ids(tool, path, texts)
    # With user-defined text in it, SentencePiece runs one search over the whole
    # text (one dummy prefix, before the symbol); llama.cpp and ferrox cut the
    # symbols out first and give each piece of text between them its own.
    # SentencePiece also puts its dummy prefix before a text of spaces alone,
    # where llama.cpp (and ferrox) put it before the first non-space character.
    with_symbols = [any(u in t for u in USER_SYMBOLS) or (t and not t.strip(" ")) for t in texts]
    vs_sp = [(t, w, g) for t, g, u in zip(texts, got, with_symbols) if not u and (w := sentencepiece_ids(sp, t)) != g]
    vs_llama = [(t, w, g) for t, g in zip(texts, got) if (w := reference.encode(t.encode(), False, False)) != g]
    unknown = sum(sp.unk_id() in g for g in got)
    print(f"\nUGM {name}: {len(texts)} strings ({unknown} with unknown pieces); "
          f"vs SentencePiece {sum(not u for u in with_symbols) - len(vs_sp)}/{sum(not u for u in with_symbols)} identical, "
          f"vs llama.cpp {len(texts) - len(vs_llama)}/{len(texts)} identical", file=sys.stderr)
    for who, bad in (("sentencepiece", vs_sp), ("llama.cpp", vs_llama)):
        for t, w, g in bad[:5]:
            print(f"  MISMATCH {who} {t!r}\n    want   {w}\n    ferrox {g}", file=sys.stderr)
    assert unknown > 0, "no test string reached the unknown-token path"
    assert not vs_sp and not vs_llama


@pytest.mark.parametrize("name", list(CASES))
def test_invalid_utf8_matches_llama_cpp(tool, models, name):
    """Malformed bytes read as U+FFFD, one byte each (SentencePiece's encode takes str only)."""
    _, path = models[name]
    rng = random.Random(SEED + 3)
    texts = []
    for text in sample_strings(random.Random(SEED + 3))[:150]:
        raw = text.encode()
        at = rng.randint(0, len(raw))
        texts.append(raw[:at] + bytes(rng.randrange(128, 256) for _ in range(rng.randint(1, 4))) + raw[at:])
    reference = llama_ref.Reference(path)
    ferrox = llama_ref.FerroxTokenizer(tool, path)
    bad = [t for t in texts if ferrox.encode(t, False, False) != reference.encode(t, False, False)]
    ferrox.close()
    print(f"\nUGM {name}: invalid UTF-8 {len(texts) - len(bad)}/{len(texts)} as llama.cpp", file=sys.stderr)
    assert not bad, bad[:3]


@pytest.mark.parametrize("name", list(CASES))
def test_add_special_and_pieces_match_llama_cpp(tool, models, name):
    _, path = models[name]
    reference = llama_ref.Reference(path)
    texts = sample_strings(random.Random(SEED + 1))[:60]
    got = ferrox_ids(tool, path, texts, add_special=True)
    want = [reference.encode(t.encode(), True, False) for t in texts]
    assert got == want
    assert all(g and g[-1] == reference.eos() for g in got), "llama.cpp's UGM default appends EOS"
    ferrox = llama_ref.FerroxTokenizer(tool, path)
    ids = list(range(reference.n_vocab()))
    assert ferrox.pieces(ids) == [reference.piece(i) for i in ids]
    info = ferrox.info()
    ferrox.close()
    assert (info["bos"], info["eos"]) == (reference.bos(), reference.eos())


@pytest.mark.parametrize("name", list(CASES))
def test_decode_round_trips_as_sentencepiece(tool, models, name):
    model, path = models[name]
    sp = spm.SentencePieceProcessor(model_proto=model)
    texts = sample_strings(random.Random(SEED + 2))
    ferrox = llama_ref.FerroxTokenizer(tool, path)
    bad, known = [], 0
    for text in texts:
        ids = ferrox.encode(text.encode(), False, False)
        # An unknown id decodes to nothing here, to " \u2047 " in SentencePiece.
        if sp.unk_id() in ids:
            continue
        known += 1
        got = b"".join(ferrox.pieces(ids)).decode()
        # ferrox keeps the dummy-prefix space that SentencePiece's decode drops.
        if sp.decode(ids) != (got[1:] if got.startswith(" ") else got):
            bad.append((text, sp.decode(ids), got))
    ferrox.close()
    print(f"\nUGM {name}: decode {known - len(bad)}/{known} as SentencePiece's", file=sys.stderr)
    assert known > len(texts) // 10
    for t, w, g in bad[:5]:
        print(f"  DECODE {t!r}: sentencepiece {w!r} ferrox {g!r}", file=sys.stderr)
    assert not bad


def test_without_the_charsmap_llama_cpp_differs(tool, models, tmp_path):
    """The comparison can fail: llama.cpp on a copy with no charsmap disagrees with ferrox."""
    model, _ = models["nmt_nfkc"]
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    proto.normalizer_spec.precompiled_charsmap = b""
    broken = tmp_path / "no-charsmap.gguf"
    ugm_vocab.write_vocab_only(proto.SerializeToString(), broken)
    texts = sample_strings(random.Random(SEED))
    got = ferrox_ids(tool, models["nmt_nfkc"][1], texts)
    reference = llama_ref.Reference(broken)
    differ = sum(reference.encode(t.encode(), False, False) != g for t, g in zip(texts, got))
    print(f"\nUGM without charsmap: {differ}/{len(texts)} strings differ", file=sys.stderr)
    assert differ > len(texts) // 10
