"""ferrox's tokenizers against llama.cpp's, token id for token id.

For llama.cpp's vocab GGUFs and the real Gemma 3 270M: the .inp corpus plus
seeded random strings (mixed scripts, whitespace runs, digits, emoji, special
token text, invalid UTF-8, the empty string), each with and without add_special
and parse_special; then every token's piece and the BOS/EOS/EOG ids.
"""
from __future__ import annotations

import os
import random
import sys

import pytest

import llama_ref

llama_cpp = llama_ref.require_llama_cpp()

SEED = int(os.environ.get("FERROX_PARITY_SEED", "20261129"))
RANDOM_STRINGS = int(os.environ.get("FERROX_PARITY_STRINGS", "300"))

VOCABS = ["llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3"]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " ",
    "  \t\n\r\n",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "\u00e4\u00f6\u00fc\u00c4\u00d6\u00dc\u00df\u00e9\u00e8\u00ea\u00e7\u00f1\u00f8\u00e5",  # Latin-1 letters
    "\u043f\u0440\u0438\u0432\u0435\u0442\u041c\u0438\u0440",  # Cyrillic
    "\u65e5\u672c\u8a9e\u4e2d\u6587\u6f22\u5b57\u3072\u3089\u304c\u306a",  # CJK, kana
    "\u0645\u0631\u062d\u0628\u0627\u0928\u092e\u0938\u094d\u0924\u0947",  # Arabic, Devanagari
    "\U0001f600\U0001f680\U0001f44d\U0001f3fd\u200d\u2764\ufe0f\U0001f1e9\U0001f1ea",  # emoji, ZWJ, flags
    "\u00a0\u2009\u3000\u2028\u0085",  # non-ASCII whitespace
    "\u00b2\u00bd\u0663\u2167\uff11",  # other numbers
    "\u0301\u0308\u20ac\u00a9\u2122\u2192\u221e",  # combining marks, symbols
    "'s't're've'm'll'd'S'T'RE",  # contractions
]

# Not F4..F7: such a lead can decode past U+10FFFF, and llama.cpp's BPE path then
# aborts the process (an uncaught exception in unicode_cpt_to_utf8).
SPLICE_BYTES = [b for b in range(256) if not 0xF4 <= b <= 0xF7]

SPECIAL_TEXTS = [
    "<s>", "</s>", "<unk>", "<pad>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<start_of_turn>",
    "<end_of_turn>", "<|begin_of_text|>", "<|eot_id|>", "<|user|>", "<|assistant|>", "<|end|>", "<mask>",
]


def random_strings(rng: random.Random, count: int) -> list[bytes]:
    out: list[bytes] = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            kind = rng.random()
            if kind < 0.08:
                parts.append(rng.choice(SPECIAL_TEXTS))
            elif kind < 0.14:
                parts.append(rng.choice(" \n\t") * rng.randint(2, 9))
            elif kind < 0.20:
                parts.append(str(rng.randint(0, 10**rng.randint(1, 12))))
            else:
                pool = rng.choice(POOLS)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 8))))
        text = "".join(parts).encode("utf-8")
        if rng.random() < 0.1:  # raw bytes spliced in: invalid UTF-8 must match too
            at = rng.randint(0, len(text))
            text = text[:at] + bytes(rng.choice(SPLICE_BYTES) for _ in range(rng.randint(1, 6))) + text[at:]
        out.append(text)
    return out


def corpus(name_for_inp: str | None) -> list[bytes]:
    rng = random.Random(SEED)
    print(f"\nparity corpus seed {SEED} (FERROX_PARITY_SEED), {RANDOM_STRINGS} random strings", file=sys.stderr)
    texts: list[bytes] = [b"", b" ", b"  ", b"\n", b" \n \n", b"Hello world", b" Hello world", b"1234567890",
                          b"   leading and trailing   ", b"a\tb\r\nc", b"\xff\xfe broken \xc3", b"\xe2\x82",
                          "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n".encode(),
                          b"<|im_start|>system\nYou are<|im_end|>", b"<s>[INST] x [/INST]</s>"]
    if name_for_inp:
        texts += llama_ref.read_vocab_cases(llama_ref.vocab_path(name_for_inp))
    texts += [" ".join(SPECIAL_TEXTS).encode(), "".join(SPECIAL_TEXTS).encode()]
    texts += random_strings(rng, RANDOM_STRINGS)
    return texts


def gguf_cases():
    cases = []
    for name in VOCABS:
        cases.append(pytest.param(llama_ref.vocab_path(name), name, id=name))
    cases.append(pytest.param(llama_ref.gemma3_path(), "llama-spm", id="gemma-3-270m"))
    return cases


@pytest.fixture(scope="module")
def tool():
    path = llama_ref.find_tool("ferrox_tokenize_tool", "FERROX_TOKENIZE_TOOL")
    if path is None or not path.exists():
        pytest.skip("ferrox_tokenize_tool is not built (build target ferrox_tokenize_tool)")
    return path


def open_pair(tool, gguf):
    if not gguf.exists():
        pytest.skip(f"{gguf} is absent (ci/fetch_test_data.sh; docs/tokenizers.md for Gemma 3)")
    return llama_ref.Reference(gguf), llama_ref.FerroxTokenizer(tool, gguf)


@pytest.mark.parametrize("gguf,inp_name", gguf_cases())
def test_encode_matches_llama_cpp(tool, gguf, inp_name):
    reference, ferrox = open_pair(tool, gguf)
    texts = corpus(inp_name)
    mismatches = []
    total = 0
    for text in texts:
        for add_special in (False, True):
            for parse_special in (False, True):
                total += 1
                want = reference.encode(text, add_special, parse_special)
                got = ferrox.encode(text, add_special, parse_special)
                if got != want:
                    mismatches.append((text, add_special, parse_special, want, got))
    ferrox.close()
    print(f"PARITY {gguf.name}: encode {total - len(mismatches)}/{total} identical "
          f"({len(texts)} strings x 4 flag combinations)", file=sys.stderr)
    for text, add, parse, want, got in mismatches[:10]:
        print(f"  MISMATCH {text!r} add_special={add} parse_special={parse}\n    llama.cpp {want}\n    ferrox    {got}",
              file=sys.stderr)
    assert not mismatches, f"{len(mismatches)} of {total} encodings differ"


@pytest.mark.parametrize("gguf,inp_name", gguf_cases())
def test_every_piece_and_special_id_matches_llama_cpp(tool, gguf, inp_name):
    reference, ferrox = open_pair(tool, gguf)
    info = ferrox.info()
    assert info["vocab_size"] == reference.n_vocab()
    assert info["bos"] == reference.bos()
    assert info["eos"] == reference.eos()
    eog_reference = [i for i in range(reference.n_vocab()) if reference.is_eog(i)]
    assert info["eog"] == eog_reference

    ids = list(range(reference.n_vocab()))
    differing = []
    for start in range(0, len(ids), 4096):
        chunk = ids[start:start + 4096]
        for token, got in zip(chunk, ferrox.pieces(chunk)):
            want = reference.piece(token)
            if got != want:
                differing.append((token, want, got))
    ferrox.close()
    print(f"PARITY {gguf.name}: pieces {len(ids) - len(differing)}/{len(ids)} identical; "
          f"eog {eog_reference[:8]}", file=sys.stderr)
    for token, want, got in differing[:10]:
        print(f"  PIECE {token}: llama.cpp {want!r} ferrox {got!r}", file=sys.stderr)
    assert not differing, f"{len(differing)} pieces differ"
