"""Fixtures of the ferrox package's tests.

Models: the tiny random models (tests/model/make_tiny_models.py, in
$FERROX_TINY_MODELS or ~/.cache/ferrox/tiny-models) and Gemma 3 270M
($FERROX_GEMMA_MODEL or ~/.cache/ferrox/models; ci/fetch-model.sh); a test
whose model is absent is skipped with the reason. The independent references:
the `ferrox` CLI ($FERROX_BIN, its plugins from $FERROX_CLI_PLUGIN_DIR) and the
`gguf` package's reader.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
import random
import re
import subprocess
from pathlib import Path
from typing import List

import pytest

CACHE = Path(os.environ.get("FERROX_CACHE_DIR", Path.home() / ".cache" / "ferrox"))
TINY = Path(os.environ.get("FERROX_TINY_MODELS", CACHE / "tiny-models"))
GEMMA = Path(os.environ.get("FERROX_GEMMA_MODEL", CACHE / "models" / "gemma-3-270m-q4_k_m.gguf"))
FERROX_BIN = os.environ.get("FERROX_BIN", "")
REPO = Path(__file__).resolve().parents[2]

SEED = int(os.environ.get("FERROX_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
print(f"python tests: seed {SEED} (FERROX_TEST_SEED to repeat)")


def need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent (tests/model/make_tiny_models.py, ci/fetch-model.sh)")
    return path


@pytest.fixture
def rng(request) -> random.Random:
    # One stream per test, from the printed seed and the test's name.
    return random.Random(f"{SEED}:{request.node.name}")


@pytest.fixture(scope="session")
def tiny_llama_path() -> Path:
    return need(TINY / "tiny-llama.gguf")


@pytest.fixture(scope="session")
def tiny_qwen2_path() -> Path:
    return need(TINY / "tiny-qwen2.gguf")


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    return need(GEMMA)


@pytest.fixture(scope="session")
def tiny_llama(tiny_llama_path):
    import ferrox

    with ferrox.Model(tiny_llama_path, n_threads=2) as model:
        yield model


@pytest.fixture(scope="session")
def gemma(gemma_path):
    import ferrox

    with ferrox.Model(gemma_path, n_threads=2, n_ctx=512) as model:
        yield model


def cli(*args: str) -> subprocess.CompletedProcess:
    """The ferrox CLI, with the build's plugins and no user configuration."""
    if not FERROX_BIN:
        pytest.skip("needs FERROX_BIN (the ferrox CLI) for the reference")
    env = dict(os.environ, XDG_CONFIG_HOME="/nonexistent", FERROX_CONFIG="")
    plugins = os.environ.get("FERROX_CLI_PLUGIN_DIR")
    if plugins:
        env["FERROX_PLUGIN_PATH"] = plugins
    done = subprocess.run([FERROX_BIN, "--log-level", "warn", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def cli_run_json(model: Path, *args: str) -> dict:
    """`ferrox run --json`'s document."""
    return json.loads(cli("run", "-m", str(model), "-t", "2", "--json", *args).stdout)


def cli_text(completion) -> str:
    """A completion's text as `ferrox run --json` writes it: bytes that are not
    UTF-8 as \\xNN (core/src/util/escape.cpp), the rest as it is."""
    return completion.text_bytes.decode("utf-8", errors="backslashreplace")


def cli_prompt_tokens(model: Path, *args: str) -> List[int]:
    """The prompt's tokens as `ferrox run --verbose-prompt` prints them."""
    done = cli("run", "-m", str(model), "-t", "2", "-n", "0", "--verbose-prompt", *args)
    found = re.search(r"prompt tokens \((\d+)\): \[([0-9, ]*)\]", done.stderr)
    assert found, done.stderr
    return [int(t) for t in found.group(2).split(",") if t.strip()]


# GGUF value types (the format's specification, gguf-py's GGUFValueType) -> struct code
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9


def gguf_string_array(path: Path, key: str) -> List[str]:
    """A string-array value of a GGUF file, read by the format's specification.

    An independent reader (the `gguf` package's GGUFReader parses every field
    into objects: ~15 s for Gemma's 262144-token vocabulary on this host,
    this ~0.3 s). Little-endian GGUF v2/v3 only."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        magic, _version, _n_tensors, n_kv = struct.unpack_from("<4sIQQ", m, 0)
        assert magic == b"GGUF", path
        at = 24

        def string(at: int):
            (n,) = struct.unpack_from("<Q", m, at)
            return m[at + 8:at + 8 + n], at + 8 + n

        def skip(kind: int, at: int) -> int:
            if kind in _SCALARS:
                return at + struct.calcsize("<" + _SCALARS[kind])
            if kind == _STRING:
                return string(at)[1]
            assert kind == _ARRAY, kind
            inner, count = struct.unpack_from("<IQ", m, at)
            at += 12
            if inner in _SCALARS:
                return at + count * struct.calcsize("<" + _SCALARS[inner])
            for _ in range(count):
                at = skip(inner, at)
            return at

        for _ in range(n_kv):
            name, at = string(at)
            (kind,) = struct.unpack_from("<I", m, at)
            at += 4
            if name.decode() != key:
                at = skip(kind, at)
                continue
            inner, count = struct.unpack_from("<IQ", m, at)
            assert kind == _ARRAY and inner == _STRING, (key, kind, inner)
            at += 12
            out = []
            for _ in range(count):
                value, at = string(at)
                out.append(value.decode("utf-8"))
            return out
    raise KeyError(f"{path}: no {key}")


def random_text(rng: random.Random, n: int) -> str:
    """Words, punctuation, digits and a few non-ASCII characters (never empty)."""
    alphabet = list("abcdefghijklmnopqrstuvwxyz") * 4 + list(" .,!?0123456789") + list("éüßλж中")
    words = []
    while sum(len(w) + 1 for w in words) < n:
        words.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))))
    return " ".join(words)[:n].strip() or "x"
