"""`ferrox run` / `ferrox chat` with --grammar and --grammar-file: a bad grammar is
refused by line:column before the model loads; on Gemma 3 270M (skipped visibly when
absent) every seeded draw is a sentence of the grammar and generation ends there."""
from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess

import pytest

FERROX = os.environ.get("FERROX_BIN", "build/ci/bin/ferrox")
GEMMA = pathlib.Path(
    os.environ.get("FERROX_GEMMA3_GGUF", pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf")
)
SEED = int(os.environ.get("FERROX_GRAMMAR_SEED", random.SystemRandom().randrange(1 << 30)))


def ferrox(*args, stdin: str | None = None, timeout: int = 300):
    return subprocess.run([FERROX, *args], input=stdin, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_bad_grammar_is_refused_by_line_and_column_before_the_model_loads(command, tmp_path):
    # The model path does not exist: the grammar is checked first. (chat has no -p.)
    base = [command, "-m", str(tmp_path / "absent.gguf")] + (["-p", "hi"] if command == "run" else [])
    r = ferrox(*base, "--grammar", 'root ::= "a" @')
    assert r.returncode != 0
    assert "--grammar: grammar:1:14: unexpected '@'" in r.stderr, r.stderr
    bad = tmp_path / "bad.gbnf"
    bad.write_text('root ::= item\n# nothing defines it\n')
    r = ferrox(*base, "--grammar-file", str(bad))
    assert r.returncode != 0
    assert f"{bad}: grammar:1:10: rule 'item' is used but never defined" in r.stderr, r.stderr
    r = ferrox(*base, "--grammar", "x", "--grammar-file", str(bad))
    assert r.returncode != 0 and "excludes" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def gemma():
    if not GEMMA.exists():
        pytest.skip(f"Gemma 3 270M is absent ({GEMMA}; bash ci/fetch-model.sh)")
    return GEMMA


def test_run_draws_only_sentences_of_the_grammar_and_stops_at_its_end(gemma):
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    grammar = 'root ::= ("yes" | "no" | "maybe") "." ([ ] [0-9]{1,2})?'
    seen = set()
    for _ in range(4):
        seed = rng.randrange(1 << 31)
        r = ferrox("run", "-m", str(gemma), "-p", "Is the sky blue? Answer:", "--grammar", grammar,
                   "--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", str(seed), "-n", "20")
        assert r.returncode == 0, r.stderr
        text = r.stdout.rstrip("\n")
        head, _, tail = text.partition(".")
        assert head in {"yes", "no", "maybe"} and (tail == "" or (tail[0] == " " and tail[1:].isdigit()
                                                               and 1 <= len(tail) - 1 <= 2)), (seed, text)
        assert "stopped before the grammar was complete" not in r.stderr, (seed, r.stderr)
        seen.add(text)
    print(f"answers: {sorted(seen)}")


def test_chat_answers_within_the_grammar(gemma):
    r = ferrox("chat", "-m", str(gemma), "--grammar", 'root ::= ("Yes" | "No") "!"', "--temp", "0",
               stdin="Is the sky blue?\nIs fire cold?\n")
    assert r.returncode == 0, r.stderr
    answers = [line for line in r.stdout.splitlines() if line]
    assert answers and all(a in {"Yes!", "No!"} for a in answers), r.stdout
    assert len(answers) == 2, r.stdout  # the grammar starts over for the second answer


@pytest.mark.parametrize("command", ["run", "chat"])
def test_a_schema_keyword_not_enforced_is_refused_by_pointer_before_the_model_loads(command, tmp_path):
    base = [command, "-m", str(tmp_path / "absent.gguf")] + (["-p", "hi"] if command == "run" else [])
    schema = '{"type":"object","properties":{"age":{"type":"integer","multipleOf":5}}}'
    r = ferrox(*base, "--json-schema", schema)
    assert r.returncode == 2, r.stderr
    assert "--json-schema: /properties/age/multipleOf: not enforced" in r.stderr, r.stderr
    f = tmp_path / "s.json"
    f.write_text('{"type": "array", "maxItems": 1000000000}')
    r = ferrox(*base, "--json-schema-file", str(f))
    assert r.returncode == 2, r.stderr
    assert f"{f}: /maxItems: 1000000000 is past the limit max_repetition (1000)" in r.stderr, r.stderr
    r = ferrox(*base, "--json-schema", "{", "--grammar", "x")
    assert r.returncode == 2 and "excludes" in r.stderr, r.stderr
    r = ferrox(*base, "--json-schema", "{not json")
    assert r.returncode == 2 and "--json-schema: not JSON" in r.stderr, r.stderr


def test_run_with_a_json_schema_writes_json_that_validates():
    jsonschema = pytest.importorskip("jsonschema")
    tiny = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))
    model = tiny / "tiny-llama.gguf"
    if not model.exists():
        pytest.skip(f"{model} is absent (tests/model/make_tiny_models.py)")
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": -5, "maximum": 500},
                                               "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
              "required": ["n", "tags"], "additionalProperties": False}
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for _ in range(4):
        seed = rng.randrange(1 << 31)
        r = ferrox("run", "-m", str(model), "-p", "JSON:", "--json-schema", json.dumps(schema), "--temp", "1",
                   "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", str(seed), "-n", "120")
        assert r.returncode == 0, r.stderr
        if "stopped before the grammar was complete" in r.stderr:
            continue
        jsonschema.validate(json.loads(r.stdout), schema)
