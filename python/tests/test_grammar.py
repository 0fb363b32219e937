"""grammar= and json_schema= (C API 0.6's grammar stage) through the binding.

On the tiny llama model (random weights: every token is the grammar's choice):
seeded generations under a JSON schema validate with the `jsonschema` package,
under a GBNF grammar match the same language as a Python regular expression;
chat's response_format; refusals as InvalidGrammarError with the engine's
line:column / JSON pointer; bad arguments refused before C.
"""
from __future__ import annotations

import json
import re

import pytest

import ferrox

SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": -5, "maximum": 500},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3},
    },
    "required": ["n", "tags"],
    "additionalProperties": False,
}
SAMPLING = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)


def test_generate_with_a_json_schema_validates(tiny_llama, rng):
    jsonschema = pytest.importorskip("jsonschema")
    complete = 0
    for _ in range(6):
        out = tiny_llama.generate("JSON:", max_tokens=100, json_schema=SCHEMA,
                                  seed=rng.randrange(1 << 31), **SAMPLING)
        if not out.grammar_complete:
            assert out.finish_reason == "length", out
            continue
        complete += 1
        assert out.finish_reason == "stop", out
        jsonschema.validate(json.loads(out.text), SCHEMA)
    assert complete >= 3, f"only {complete} of 6 generations completed the schema"


def test_a_schema_as_text_and_a_gbnf_grammar(tiny_llama, rng):
    grammar = 'root ::= ("yes" | "no") "." [0-9]{0,2}'
    for _ in range(4):
        out = tiny_llama.generate("A:", max_tokens=20, grammar=grammar,
                                  seed=rng.randrange(1 << 31), **SAMPLING)
        assert out.grammar_complete, out
        assert re.fullmatch(r"(yes|no)\.[0-9]{0,2}", out.text), out.text
    out = tiny_llama.generate("A:", max_tokens=60, json_schema='{"enum": [1, 22, 333]}',
                              seed=rng.randrange(1 << 31), **SAMPLING)
    assert out.grammar_complete and json.loads(out.text) in (1, 22, 333), out.text


def test_streaming_gives_the_same_text_as_a_whole(tiny_llama, rng):
    seed = rng.randrange(1 << 31)
    whole = tiny_llama.generate("JSON:", max_tokens=80, json_schema=SCHEMA, seed=seed, **SAMPLING)
    with tiny_llama.generate("JSON:", max_tokens=80, json_schema=SCHEMA, seed=seed, stream=True,
                             **SAMPLING) as stream:
        pieces = "".join(stream)
    assert pieces == whole.text
    assert stream.completion.grammar_complete == whole.grammar_complete


def test_max_tokens_before_the_end_says_incomplete(tiny_llama):
    out = tiny_llama.generate("JSON:", max_tokens=2, json_schema=SCHEMA, seed=3, **SAMPLING)
    assert out.finish_reason == "length" and out.grammar_complete is False, out
    plain = tiny_llama.generate("JSON:", max_tokens=2, seed=3)
    assert plain.grammar_complete is None


def test_chat_response_format(tiny_qwen2_path, rng):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    with ferrox.Model(tiny_qwen2_path, n_threads=2) as model:
        messages = [{"role": "user", "content": "Is it?"}]
        for response_format, check in [
            ({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
             lambda v: jsonschema.validate(v, schema)),
            ({"type": "json_object"}, lambda v: isinstance(v, dict) or pytest.fail(repr(v))),
        ]:
            out = model.chat(messages, max_tokens=80, response_format=response_format,
                             seed=rng.randrange(1 << 31), **SAMPLING)
            if out.grammar_complete:
                check(json.loads(out.text))
            else:
                assert out.finish_reason == "length"
        with pytest.raises(ferrox.InvalidArgumentError, match="not two"):
            model.chat(messages, response_format={"type": "json_object"}, grammar='root ::= "a"')
        with pytest.raises(ferrox.InvalidArgumentError, match="response_format type"):
            model.chat(messages, response_format={"type": "yaml"})


@pytest.mark.parametrize("kwargs, message", [
    ({"grammar": 'root ::= "a" @'}, "grammar:1:14: unexpected '@'"),
    ({"grammar": "root ::= item\n"}, "grammar:1:10: rule 'item' is used but never defined"),
    ({"json_schema": {"type": "integer", "multipleOf": 5}}, "json_schema: /multipleOf: not enforced"),
    ({"json_schema": '{"type": '}, "json_schema: [json.exception.parse_error"),
])
def test_a_refused_grammar_is_a_typed_exception_carrying_the_status(tiny_llama, kwargs, message):
    with pytest.raises(ferrox.InvalidGrammarError) as caught:
        tiny_llama.generate("a", max_tokens=1, **kwargs)
    e = caught.value
    assert isinstance(e, ferrox.InvalidArgumentError) and e.code == 1, e
    assert message in e.message, e.message


@pytest.mark.parametrize("kwargs, error", [
    ({"grammar": 'root ::= "a"', "json_schema": {}}, ferrox.InvalidArgumentError),
    ({"grammar": b'root ::= "a"'}, TypeError),
    ({"json_schema": 5}, TypeError),
    ({"json_schema": {"x": float("nan")}}, ferrox.InvalidArgumentError),
    ({"grammar": "x" * ((256 << 10) + 1)}, ferrox.InvalidArgumentError),
])
def test_bad_arguments_are_refused_before_c(tiny_llama, kwargs, error):
    with pytest.raises(error):
        tiny_llama.generate("a", max_tokens=1, **kwargs)


def test_the_grammar_error_class_is_the_c_code():
    assert ferrox.GrammarError.code == 8
    assert ferrox.GrammarError("x").code_name == "grammar"
