"""Shared helpers for comparing ferrox with llama.cpp (through llama-cpp-python).

Used by the tokenizer parity test and meant for later ones (logits, ...):
  - where the test data lives (vocab GGUFs, the Gemma 3 270M model),
  - the llama.cpp reference, loaded once per model and path,
  - a driver for ferrox's JSON-lines test tools (e.g. ferrox_tokenize_tool).

Nothing here imports llama_cpp at module import time: call require_llama_cpp()
(which skips the calling pytest module when it is absent) before using it.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib
import subprocess
from typing import Any, Iterable, Sequence

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE_DIR = pathlib.Path(os.environ.get("FERROX_CACHE_DIR", pathlib.Path.home() / ".cache" / "ferrox"))
SKIPPED_EXIT_CODE = 77  # ctest's SKIP_RETURN_CODE for the parity tests


# ---- test data ---------------------------------------------------------------

def vocab_dir() -> pathlib.Path:
    """llama.cpp's vocab-only GGUFs with .inp/.out (ci/fetch_test_data.sh)."""
    return pathlib.Path(os.environ.get("FERROX_VOCAB_DIR", CACHE_DIR / "vocab"))


def vocab_path(name: str) -> pathlib.Path:
    """ggml-vocab-NAME.gguf, e.g. vocab_path("llama-spm")."""
    return vocab_dir() / f"ggml-vocab-{name}.gguf"


def gemma3_path() -> pathlib.Path:
    """The Gemma 3 270M Q4_K_M GGUF (see docs/tokenizers.md for how it is made)."""
    return pathlib.Path(os.environ.get("FERROX_GEMMA3_GGUF", CACHE_DIR / "models" / "gemma-3-270m-q4_k_m.gguf"))


def read_vocab_cases(path: pathlib.Path) -> list[bytes]:
    """The test strings of PATH.inp (cases end with "\\n__ggml_vocab_test__\\n"; gemma-4's
    last case has no separator after it)."""
    raw = pathlib.Path(str(path) + ".inp").read_bytes()
    cases = raw.split(b"\n__ggml_vocab_test__\n")
    return cases if cases[-1] else cases[:-1]


def read_vocab_expected(path: pathlib.Path) -> list[list[int]]:
    """The Hugging Face token ids of PATH.out, one line per case."""
    lines = pathlib.Path(str(path) + ".out").read_text().split("\n")[:-1]
    return [[int(t) for t in line.split()] for line in lines]


# ---- the llama.cpp reference ---------------------------------------------------

def require_llama_cpp():
    """Imports llama_cpp, or skips the calling test module visibly."""
    import pytest

    module = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (run ci/llama_cpp.sh)")
    _avoid_amx_weight_buffers()
    return module


def _cpu_has_amx() -> bool:
    try:
        return "amx_int8" in pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def _avoid_amx_weight_buffers() -> None:
    """On a CPU with AMX, llama-cpp-python 0.3.36 built with GGML_NATIVE puts Q4_0/Q8_0/
    K-quant weights in its AMX buffer type, and ggml_backend_amx_mul_mat segfaults on the
    tiny models' shapes (seen 2 Dec 2026, Sapphire Rapids-class host). Loading every model
    with use_extra_bufts = false keeps llama.cpp on its plain CPU kernels (which also
    skips its x86 repacking); elsewhere nothing changes."""
    if not _cpu_has_amx():
        return
    import llama_cpp.llama_cpp as lib

    default = lib.llama_model_default_params

    def without_extra_buffers():
        params = default()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = without_extra_buffers


@functools.lru_cache(maxsize=8)
def load_reference(path: str, vocab_only: bool = True, **kwargs: Any):
    """A llama_cpp.Llama for PATH, cached (loading a large vocab takes seconds)."""
    import llama_cpp

    return llama_cpp.Llama(model_path=path, vocab_only=vocab_only, verbose=False, **kwargs)


class Reference:
    """llama.cpp's tokenizer for one GGUF."""

    def __init__(self, path: pathlib.Path):
        import llama_cpp

        self._lib = llama_cpp
        self.llm = load_reference(str(path))
        self.vocab = self.llm._model.vocab

    def encode(self, text: bytes, add_special: bool, parse_special: bool) -> list[int]:
        return list(self.llm.tokenize(text, add_bos=add_special, special=parse_special))

    def piece(self, token: int) -> bytes:
        """The bytes llama.cpp prints for TOKEN (special=False: control tokens are empty)."""
        import ctypes

        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            n = self._lib.llama_token_to_piece(self.vocab, token, buf, size, 0, False)
            if n >= 0:
                return buf.raw[:n]
            size = -n

    def n_vocab(self) -> int:
        return int(self._lib.llama_vocab_n_tokens(self.vocab))

    def bos(self) -> int:
        return int(self._lib.llama_vocab_bos(self.vocab))

    def eos(self) -> int:
        return int(self._lib.llama_vocab_eos(self.vocab))

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self.vocab, token))


# ---- ferrox's test tools --------------------------------------------------------

def find_tool(name: str, env_var: str) -> pathlib.Path | None:
    """A ferrox test tool: $ENV_VAR, else the newest build/*/bin/NAME in the repo."""
    if os.environ.get(env_var):
        return pathlib.Path(os.environ[env_var])
    candidates = sorted(REPO_ROOT.glob(f"build/*/bin/{name}"), key=lambda p: p.stat().st_mtime, reverse=True)
    return candidates[0] if candidates else None


class JsonLinesTool:
    """Runs a tool that answers one JSON line per JSON-line request on stdin."""

    def __init__(self, command: Sequence[str]):
        self._proc = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def ask(self, request: dict) -> dict:
        return self.ask_many([request])[0]

    def ask_many(self, requests: Iterable[dict]) -> list[dict]:
        assert self._proc.stdin and self._proc.stdout
        requests = list(requests)
        replies = []
        for request in requests:  # one at a time: the pipes stay small
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
            if not line:
                err = self._proc.stderr.read() if self._proc.stderr else ""
                raise RuntimeError(f"tool exited (rc={self._proc.poll()}): {err.strip()}")
            reply = json.loads(line)
            if "error" in reply:
                raise RuntimeError(f"tool refused {request}: {reply['error']}")
            replies.append(reply)
        return replies

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)


class FerroxTokenizer:
    """ferrox's tokenizer for one GGUF, through ferrox_tokenize_tool."""

    def __init__(self, tool: pathlib.Path, gguf: pathlib.Path):
        self._tool = JsonLinesTool([str(tool), str(gguf)])

    def encode(self, text: bytes, add_special: bool, parse_special: bool) -> list[int]:
        reply = self._tool.ask(
            {"op": "encode", "text_hex": text.hex(), "add_special": add_special, "parse_special": parse_special}
        )
        return reply["ids"]

    def pieces(self, ids: Sequence[int]) -> list[bytes]:
        return [bytes.fromhex(h) for h in self._tool.ask({"op": "pieces", "ids": list(ids)})["pieces_hex"]]

    def info(self) -> dict:
        return self._tool.ask({"op": "info"})

    def close(self) -> None:
        self._tool.close()


# Words the embedding parity tests draw their texts from.
EMBED_WORDS = ("the a river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper "
               "north glass signal tide").split()


def ferrox_embed_vectors(ferrox: str, model: pathlib.Path, texts: Sequence[str]) -> "np.ndarray":
    """`ferrox embed --json` of every text in one call (several sequences per decode),
    one row per text, as float64."""
    import numpy as np

    cmd = [ferrox, "embed", "-m", str(model), "-t", "2", "--json"]
    if os.environ.get("FERROX_PLUGIN_DIR"):
        cmd[1:1] = ["--plugin-dir", os.environ["FERROX_PLUGIN_DIR"]]
    for t in texts:
        cmd += ["-p", t]
    env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH")}
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return np.array(json.loads(proc.stdout), dtype=np.float64)


def llama_embed_vectors(llama_cpp, model: pathlib.Path, texts: Sequence[str],
                        n_ctx: int = 512) -> "tuple[np.ndarray, list[int]]":
    """llama.cpp's normalised pooled vector of each text, one call a text (each its own
    batch there), f32 KV as ferrox's default; and each text's token count."""
    import numpy as np

    llm = llama_cpp.Llama(model_path=str(model), embedding=True, n_ctx=n_ctx, n_batch=n_ctx,
                          n_ubatch=n_ctx, n_threads=2, verbose=False, type_k=0, type_v=0)
    vectors = [llm.embed(t, normalize=True) for t in texts]
    counts = [len(llm.tokenize(t.encode())) for t in texts]
    return np.array(vectors, dtype=np.float64), counts


def cosines(a: "np.ndarray", b: "np.ndarray") -> "np.ndarray":
    """Row by row."""
    import numpy as np

    assert a.shape == b.shape, (a.shape, b.shape)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def check_vectors_agree(name: str, got: "np.ndarray", want: "np.ndarray", counts: list[int],
                        min_cosine: float, spread: bool = True) -> None:
    """Every row of `got` within `min_cosine` of `want`'s, with the figures printed; with
    `spread`, the texts must include one of at most 4 tokens and one past 16 (the CPU
    plugin's panel GEMM)."""
    import numpy as np

    c = cosines(got, want)
    rel = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
    print(f"\n{name}: tokens {counts}, worst 1 - cosine {(1 - c).max():.1e}, relative error "
          f"mean {rel.mean():.2e} worst {rel.max():.2e}, max |diff| {np.abs(got - want).max():.2e}")
    if spread:
        assert max(counts) > 16 and min(counts) <= 4, counts
    for i, x in enumerate(c):
        assert x >= min_cosine, f"input {i} ({counts[i]} tokens): cosine {x:.6f} < {min_cosine}"
