"""ferrox.h 0.6's grammar stage, driven through the c_api_grammar C99 program on
the tiny llama model (random weights: every token is the grammar's choice).

Seeded samples at temperature 1 under a JSON schema must parse with Python's json
and validate with the `jsonschema` package; under a GBNF grammar they must match
the same language written as a Python regular expression. Only answers that ended
("stop") are validated; the grammar state of each says whether it was complete.
A bad grammar is refused with its line:column, a schema keyword not enforced with
its JSON pointer. The seed is printed; FERROX_GRAMMAR_SEED repeats a run.
"""
from __future__ import annotations

import json
import os
import pathlib
import random
import re
import subprocess

import pytest

TOOL = os.environ.get("FERROX_C_API_GRAMMAR", "")
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))
MODEL = TINY / "tiny-llama.gguf"
SEED = int(os.environ.get("FERROX_GRAMMAR_SEED", random.SystemRandom().randrange(1 << 30)))
SAMPLES = 12
MAX_TOKENS = 120

# ferrox_grammar_state
OPEN, COMPLETE, ENDED = 1, 2, 3

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": -20, "maximum": 300},
        "name": {"enum": ["ada", "bob", "cy"]},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
    },
    "required": ["id", "name"],
    "additionalProperties": False,
}
GBNF = 'root ::= "(" num ("," num){0,3} ")"\nnum ::= "-"? [1-9] [0-9]{0,2}\n'
GBNF_RE = re.compile(r"\(-?[1-9][0-9]{0,2}(,-?[1-9][0-9]{0,2}){0,3}\)")


@pytest.fixture(scope="module")
def tool():
    if not TOOL:
        pytest.skip("FERROX_C_API_GRAMMAR is not set (run through ctest)")
    if not MODEL.exists():
        pytest.skip(f"{MODEL} is absent (tests/model/make_tiny_models.py)")
    print(f"seed {SEED}")
    return TOOL


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([TOOL, str(MODEL), *args], capture_output=True, text=True, timeout=120)


def samples(kind: str, text: str) -> list[tuple[str, int, bytes]]:
    r = run("gen", kind, text, str(SEED), str(SAMPLES), str(MAX_TOKENS))
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        finish, state, hexed = (line.split(" ") + [""])[:3]
        out.append((finish, int(state), bytes.fromhex(hexed)))
    assert len(out) == SAMPLES, r.stdout
    return out


def test_samples_under_a_json_schema_validate(tool):
    jsonschema = pytest.importorskip("jsonschema")
    ended = 0
    for finish, state, text in samples("schema", json.dumps(SCHEMA)):
        if finish == "length":
            assert state in (OPEN, COMPLETE), (state, text)
            continue
        ended += 1
        assert state == COMPLETE, (state, text)  # end of generation came where it matched
        jsonschema.validate(json.loads(text.decode("utf-8")), SCHEMA)
    assert ended >= SAMPLES // 2, f"only {ended} of {SAMPLES} answers ended"


def test_samples_under_a_gbnf_grammar_match_its_language(tool):
    ended = 0
    for finish, state, text in samples("gbnf", GBNF):
        if finish == "length":
            continue
        ended += 1
        assert state == COMPLETE, (state, text)
        assert GBNF_RE.fullmatch(text.decode("utf-8")), text
    assert ended >= SAMPLES // 2, f"only {ended} of {SAMPLES} answers ended"


def test_the_calls_around_the_stage(tool):
    r = run("checks")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("kind, text, code, message", [
    ("gbnf", 'root ::= "a" @', "invalid argument", "grammar:1:14: unexpected '@'"),
    ("gbnf", "root ::= item\n# nothing defines it\n", "invalid argument",
     "grammar:1:10: rule 'item' is used but never defined"),
    ("gbnf", 'expr ::= expr "+" "1"\nroot ::= expr\n', "invalid argument", "left-recursive"),
    ("schema", '{"type":"object","properties":{"age":{"type":"integer","multipleOf":5}}}',
     "invalid argument", "json_schema: /properties/age/multipleOf: not enforced"),
    ("schema", '{"type": "array", "maxItems": 1000000000}', "invalid argument",
     "json_schema: /maxItems: 1000000000 is past the limit max_repetition (1000)"),
    ("schema", '{"type": ', "invalid argument", "json_schema: [json.exception.parse_error"),
    ("schema", "[" * 70 + "]" * 70, "invalid argument", "json_schema: nested deeper than 64 levels"),
    ("both", '{"type": "string"}', "invalid argument", "grammar and json_schema are both set"),
    ("nomodel", 'root ::= "a"', "invalid argument", "needs model"),
    ("gbnf", 'root ::= "a"', "ok", ""),
])
def test_refusals_name_the_place(tool, kind, text, code, message):
    r = run("refuse", kind, text)
    assert r.returncode == 0, r.stderr
    got_code, _, got_message = r.stdout.rstrip("\n").partition("\t")
    assert got_code == code, r.stdout
    assert message in got_message, r.stdout
