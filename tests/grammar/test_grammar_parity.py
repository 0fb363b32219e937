"""ferrox's GBNF engine against llama.cpp's own (llama-cpp-python 0.3.36).

1. Acceptance: for every .gbnf that llama.cpp ships (extracted from the cached
   sdist at test time) and a set of hand-written grammars, random strings --
   random walks through llama.cpp's grammar, and mutations of them -- are fed
   byte by byte to both engines; the first refused byte and whether the text is
   complete must agree. llama.cpp is driven through its grammar sampler over
   Gemma 3's byte tokens (<0x00>..<0xFF>), so each byte is one token.
2. Masks: along llama.cpp's own greedy constrained generation on Gemma 3 270M
   (json.gbnf, arithmetic.gbnf, chess.gbnf), the set of allowed tokens at every
   step agrees over the whole 262k vocabulary (tokens llama.cpp matches by
   their control-token name, which ferrox gives no text, are counted apart).
3. Generation: `ferrox run --grammar-file G --temp 0` emits a token sequence
   that llama.cpp's grammar accepts token by token, and that equals llama.cpp's
   greedy sequence up to the first numerical tie-break.

Skips (visibly) when llama-cpp-python, the sdist, the model or the tools are absent.
"""
from __future__ import annotations

import ctypes
import json
import os
import pathlib
import random
import subprocess
import sys
import tarfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "parity"))
import llama_ref  # noqa: E402

SDIST = pathlib.Path(
    os.environ.get("FERROX_LLAMA_SDIST", llama_ref.CACHE_DIR / "sdist" / "llama_cpp_python-0.3.36.tar.gz")
)
SEED = int(os.environ.get("FERROX_GRAMMAR_SEED", "20261206"))

# Grammars of our own, for what the shipped ones do not reach.
OWN_GRAMMARS = {
    "repetitions": 'root ::= "a"{2} "b"{1,3} ("c" | "d"){0,2} "e"{2,} [x-z]? "!"\n',
    "classes": 'root ::= [^a-c\\n] [\\x41-\\x43] [\\u00e0-\\u00ff]+ [-.] .\n',
    "nested": 'root ::= ( "(" root ")" | "[" root "]" )* "."?\n',
    "escapes": 'root ::= "\\"\\\\\\t" [\\]\\[] "\\u00e9\\U0001F600" "x"\n',
    "alternation": "root ::= word (\" \" word)*\nword ::= \"cat\" | \"car\" | \"cart\" | \"c\" [a-c]+\n",
    "unicode": "root ::= [ぁ-ゟ]+ \"。\" | [\\U0001F600-\\U0001F64F]{1,4}\n",
    "empty-alt": 'root ::= a b "z"\na ::= | "a" | "aa"\nb ::= "b"* \n',
}

GENERATION_GRAMMARS = ["json.gbnf", "arithmetic.gbnf", "chess.gbnf"]
PROMPTS = {
    "json.gbnf": "A JSON object describing a cat:",
    "arithmetic.gbnf": "Some equations:\n",
    "chess.gbnf": "A chess game in PGN:\n",
}
N_GENERATE = 32


@pytest.fixture(scope="module")
def lib():
    return llama_ref.require_llama_cpp()


@pytest.fixture(scope="module")
def shipped_grammars(tmp_path_factory) -> dict[str, str]:
    if not SDIST.exists():
        pytest.skip(f"the llama-cpp-python sdist is not cached at {SDIST}")
    out = {}
    with tarfile.open(SDIST) as tar:
        for member in tar.getmembers():
            p = pathlib.PurePosixPath(member.name)
            if p.suffix == ".gbnf" and p.parent.name == "grammars" and "vendor/llama.cpp" in member.name:
                out[p.name] = tar.extractfile(member).read().decode()
    assert len(out) >= 8, f"expected llama.cpp's grammars in {SDIST}, found {sorted(out)}"
    return out


@pytest.fixture(scope="module")
def tool_path():
    tool = llama_ref.find_tool("ferrox_grammar_tool", "FERROX_GRAMMAR_TOOL")
    if not tool or not tool.exists():
        pytest.skip("ferrox_grammar_tool is not built")
    return tool


@pytest.fixture(scope="module")
def gemma():
    path = llama_ref.gemma3_path()
    if not path.exists():
        pytest.skip(f"Gemma 3 270M is absent ({path}; bash ci/fetch-model.sh)")
    return path


class LlamaGrammar:
    """llama.cpp's grammar sampler over one vocabulary."""

    def __init__(self, lib, ref: llama_ref.Reference):
        self.lib = lib
        self.ref = ref
        self.vocab = ref.vocab
        self.n_vocab = ref.n_vocab()
        self.byte_token = {}
        for t in range(self.n_vocab):
            text = lib.llama_vocab_get_text(self.vocab, t)
            if text and len(text) == 6 and text.startswith(b"<0x") and text.endswith(b">"):
                self.byte_token[int(text[3:5], 16)] = t
        assert len(self.byte_token) == 256, "Gemma 3's vocabulary should have all 256 byte tokens"
        self.eos = ref.eos()
        self._one = (lib.llama_token_data * 1)()
        self._all = None

    def sampler(self, grammar: str):
        s = self.lib.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        return s or None

    def allows(self, smpl, token: int) -> bool:
        self._one[0].id = token
        self._one[0].logit = 0.0
        self._one[0].p = 0.0
        arr = self.lib.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self.lib.llama_sampler_apply(smpl, ctypes.byref(arr))
        return self._one[0].logit != float("-inf")

    def check(self, grammar: str, text: bytes) -> tuple[int, bool]:
        smpl = self.sampler(grammar)
        assert smpl, "llama.cpp refused the grammar"
        try:
            for i, b in enumerate(text):
                t = self.byte_token[b]
                if not self.allows(smpl, t):
                    return i, False
                self.lib.llama_sampler_accept(smpl, t)
            return len(text), self.allows(smpl, self.eos)
        finally:
            self.lib.llama_sampler_free(smpl)

    def random_walk(self, grammar: str, rng: random.Random, max_len: int) -> bytes:
        """A random text llama.cpp's grammar allows, one byte at a time."""
        smpl = self.sampler(grammar)
        out = bytearray()
        try:
            for _ in range(max_len):
                allowed = [b for b in range(256) if self.allows(smpl, self.byte_token[b])]
                done = self.allows(smpl, self.eos)
                if not allowed or (done and rng.random() < 0.15):
                    break
                # Lean towards ASCII so walks do not sit in long UTF-8 runs.
                ascii_ok = [b for b in allowed if b < 0x80]
                b = rng.choice(ascii_ok if ascii_ok and rng.random() < 0.8 else allowed)
                out.append(b)
                self.lib.llama_sampler_accept(smpl, self.byte_token[b])
        finally:
            self.lib.llama_sampler_free(smpl)
        return bytes(out)

    def mask(self, smpl) -> list[bool]:
        import numpy as np

        if self._all is None:
            self._all = (self.lib.llama_token_data * self.n_vocab)()
            self._view = np.ctypeslib.as_array(self._all)
        self._view["id"] = np.arange(self.n_vocab, dtype=np.int32)
        self._view["logit"] = 0.0
        self._view["p"] = 0.0
        arr = self.lib.llama_token_data_array(data=self._all, size=self.n_vocab, selected=-1, sorted=False)
        self.lib.llama_sampler_apply(smpl, ctypes.byref(arr))
        order = self._view["id"].copy()
        allowed = np.zeros(self.n_vocab, dtype=bool)
        allowed[order] = self._view["logit"] != -np.inf
        return allowed


@pytest.fixture(scope="module")
def llama(lib, gemma):
    return LlamaGrammar(lib, llama_ref.Reference(gemma))


def mutate(text: bytes, rng: random.Random) -> bytes:
    alphabet = b'{}[]()",:.-+*/=\\ \n\tabcxyz019eE\xc3\xa9\xe3\x81\x82'
    t = bytearray(text)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(4)
        i = rng.randint(0, len(t))
        if op == 0 or not t:
            t[i:i] = bytes([rng.choice(alphabet)])
        elif op == 1 and i < len(t):
            del t[i]
        elif op == 2 and i < len(t):
            t[i] = rng.choice(alphabet)
        else:
            t = t[: rng.randint(0, len(t))]
    return bytes(t)


def run_tool(tool, requests, gguf=None):
    proc = subprocess.run(
        [str(tool)] + ([str(gguf)] if gguf else []),
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_acceptance_matches_llama_cpp(llama, shipped_grammars, tool_path):
    rng = random.Random(SEED)
    print(f"\nseed {SEED}")
    grammars = dict(shipped_grammars)
    grammars.update({f"own:{k}": v for k, v in OWN_GRAMMARS.items()})
    total = mismatches = 0
    for name, source in sorted(grammars.items()):
        texts = []
        for _ in range(25):
            walk = llama.random_walk(source, rng, rng.randint(1, 60))
            texts.append(walk)
            texts.append(mutate(walk, rng))
        texts.append(bytes(rng.randrange(256) for _ in range(8)))
        texts.append(b"")
        ours = run_tool(tool_path, [{"op": "check", "grammar": source, "texts_hex": [t.hex() for t in texts]}])[0]
        assert "parse_error" not in ours, f"{name}: ferrox refused a grammar llama.cpp takes: {ours}"
        complete = 0
        for text, got in zip(texts, ours["results"]):
            want_prefix, want_complete = llama.check(source, text)
            total += 1
            complete += want_complete
            if (got["prefix"], got["complete"]) != (want_prefix, want_complete):
                mismatches += 1
                print(f"  {name}: {text!r}: ferrox {got}, llama.cpp prefix {want_prefix} complete {want_complete}")
        print(f"  {name}: {len(texts)} texts, {complete} complete per llama.cpp")
    print(f"{total} texts over {len(grammars)} grammars, {mismatches} disagreements")
    assert mismatches == 0


@pytest.mark.parametrize("name", GENERATION_GRAMMARS)
def test_masks_and_greedy_generation_match_llama_cpp(name, lib, llama, gemma, shipped_grammars, tool_path):
    source = shipped_grammars[name]
    ferrox = llama_ref.find_tool("ferrox", "FERROX_BIN")
    if not ferrox:
        pytest.skip("the ferrox binary is not built")
    # ferrox's greedy constrained run.
    proc = subprocess.run(
        [str(ferrox), "run", "-m", str(gemma), "-p", PROMPTS[name], "--grammar", source, "--temp", "0",
         "-n", str(N_GENERATE), "--json", "-t", "2"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(proc.stdout)["tokens"]
    # llama.cpp's greedy constrained run, token by token through its own sampler chain.
    theirs = greedy_with_grammar(lib, llama, gemma, source, PROMPTS[name], N_GENERATE)
    same = 0
    while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
        same += 1
    print(f"\n{name}: ferrox {len(ours)} tokens, llama.cpp {len(theirs)}; identical for {same}")
    print(f"  ferrox: {b''.join(llama.ref.piece(t) for t in ours)!r}")
    print(f"  llama:  {b''.join(llama.ref.piece(t) for t in theirs)!r}")

    # Every token ferrox produced is one llama.cpp's grammar allows at that point.
    smpl = llama.sampler(source)
    try:
        for i, t in enumerate(ours):
            assert llama.allows(smpl, t), f"{name}: ferrox token {i} ({t}, {llama.ref.piece(t)!r}) breaks the grammar"
            llama.lib.llama_sampler_accept(smpl, t)
    finally:
        llama.lib.llama_sampler_free(smpl)

    # The masks along llama.cpp's sequence, over the whole vocabulary.
    reply = run_tool(tool_path, [{"op": "masks", "grammar": source, "tokens": theirs}], gguf=gemma)[0]
    assert "masks_hex" in reply, reply
    import numpy as np

    pieces_empty = np.array([len(llama.ref.piece(t)) == 0 for t in range(llama.n_vocab)])
    eog = np.array([llama.ref.is_eog(t) for t in range(llama.n_vocab)])
    named_only = pieces_empty & ~eog  # control tokens: llama.cpp matches their names
    smpl = llama.sampler(source)
    diffs = named = 0
    try:
        for step, hexmask in enumerate(reply["masks_hex"]):
            bits = np.unpackbits(np.frombuffer(bytes.fromhex(hexmask), dtype=np.uint8), bitorder="little")
            ferrox_allowed = bits[: llama.n_vocab].astype(bool)
            llama_allowed = llama.mask(smpl)
            differ = ferrox_allowed != llama_allowed
            named += int((differ & named_only).sum())
            real = np.flatnonzero(differ & ~named_only)
            if len(real):
                diffs += len(real)
                print(f"  step {step}: {len(real)} tokens differ, e.g. "
                      f"{[(int(t), llama.ref.piece(int(t)), bool(ferrox_allowed[t])) for t in real[:5]]}")
            if step < len(theirs):
                llama.lib.llama_sampler_accept(smpl, theirs[step])
    finally:
        llama.lib.llama_sampler_free(smpl)
    ms = reply["ms"]
    print(f"  masks: {len(reply['masks_hex'])} steps, {diffs} differing tokens "
          f"(+{named} control tokens llama.cpp matches by name); "
          f"ms/step mean {sum(ms) / len(ms):.2f}, max {max(ms):.2f}, first {ms[0]:.2f}")
    assert diffs == 0
    # Up to the first difference the two agree; a difference is a near-tie of the
    # logits (both tokens allowed, the masks equal), never the grammar.
    assert same >= min(5, len(theirs)), f"{name}: the runs part after {same} tokens"


def greedy_with_grammar(lib, llama, gemma, source: str, prompt: str, n: int) -> list[int]:
    """llama.cpp's greedy decode with its grammar sampler first in the chain."""
    import numpy as np

    llm = llama_ref.load_reference(str(gemma), vocab_only=False, n_ctx=512, n_threads=2)
    llm.reset()
    tokens = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    llm.eval(tokens)
    smpl = llama.sampler(source)
    out = []
    try:
        for _ in range(n):
            # The last evaluated row (Llama.scores holds nothing without logits_all).
            row = lib.llama_get_logits_ith(llm.ctx, -1)
            logits = np.ctypeslib.as_array(row, shape=(llama.n_vocab,)).astype(np.float32)
            allowed = llama.mask(smpl)
            logits[~allowed] = -np.inf
            t = int(np.argmax(logits))
            if llama.ref.is_eog(t):
                break
            out.append(t)
            lib.llama_sampler_accept(smpl, t)
            llm.eval([t])
    finally:
        lib.llama_sampler_free(smpl)
    return out
