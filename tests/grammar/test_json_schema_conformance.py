"""Structured output end to end, against references ferrox did not write.

Conformance: for each schema below, seeded samples at temperature 1 from a tiny
random-weight model through `ferrox serve` (/v1/completions with response_format
json_schema); every answer that ends ("stop") must parse with Python's json and
validate with the `jsonschema` package (formats checked too: jsonschema's own
checkers, and Python's datetime for time/date-time). A random model explores the
grammar widely: it has no idea what JSON looks like, so every token is the
grammar's choice.

Counts: FERROX_SCHEMA_SAMPLES per schema (default 12 in ctest; the issue's 200 with
FERROX_SCHEMA_SAMPLES=200). The seed is printed; FERROX_SCHEMA_SEED repeats a run.

The fault check: the same schema's grammar with one rule loosened (an integer's
bounds replaced by any integer), sent as `grammar`, must produce answers that
jsonschema refuses -- the validation can fail. Then the `openai` SDK's
`chat.completions.parse` with a Pydantic model (on the tiny Qwen2, which carries a
chat template), the 400s that name the JSON pointer, and finish_reason "length"
when max_tokens ends the answer before the grammar does.
"""
from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import pathlib
import random
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import jsonschema
import pytest

FERROX = os.environ.get("FERROX_BIN", "")
TOOL = os.environ.get("FERROX_GRAMMAR_TOOL", "")
TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS", pathlib.Path.home() / ".cache/ferrox/tiny-models"))
SAMPLES = int(os.environ.get("FERROX_SCHEMA_SAMPLES", "200"))
SEED = int(os.environ.get("FERROX_SCHEMA_SEED", random.SystemRandom().randrange(1 << 30)))
MAX_TOKENS = 160

WORD = {"type": "string", "maxLength": 6}
SCHEMAS: dict[str, dict] = {
    "flat_object": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 9999},
                                                     "tag": WORD},
                    "required": ["id"], "additionalProperties": False},
    "nested_objects": {"type": "object", "properties": {
        "name": WORD,
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "address": {"type": "object", "properties": {
            "city": {"enum": ["Paris", "Oslo", "Lima"]},
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "required": ["city", "zip"], "additionalProperties": False}},
        "required": ["name", "age", "address"], "additionalProperties": False},
    "bounded_int_array": {"type": "array", "items": {"type": "integer", "minimum": -50, "maximum": 50},
                          "minItems": 2, "maxItems": 5},
    "string_enum": {"enum": ["red", "green", "blue", "a \"quoted\" one", "é"]},
    "mixed_enum_const": {"type": "object", "properties": {"v": {"const": 42}, "w": {"enum": [1.5, None, True, "x"]}},
                         "required": ["v", "w"], "additionalProperties": False},
    "any_of": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string", "maxLength": 3},
                         {"type": "null"}]},
    "one_of_tagged": {"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "integer", "minimum": 1, "maximum": 99}},
         "required": ["kind", "r"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1, "maximum": 99}},
         "required": ["kind", "side"], "additionalProperties": False}]},
    "recursive_ref": {"$ref": "#/$defs/node", "$defs": {"node": {
        "type": "object", "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 9},
                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 1}},
        "required": ["v"], "additionalProperties": False}}},
    "definitions_ref": {"type": "array", "items": {"$ref": "#/definitions/point"}, "maxItems": 3,
                        "definitions": {"point": {"type": "object", "properties": {
                            "x": {"type": "integer", "minimum": -9, "maximum": 9},
                            "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                            "required": ["x", "y"], "additionalProperties": False}}},
    "pattern_code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3,4}$"},
    "pattern_alternation": {"type": "string", "pattern": "^(foo|bar)(-[a-z]{1,3})?\\.(json|txt)$"},
    "pattern_escapes": {"type": "string", "pattern": "^\\w{1,3}\\s\\d{2}[\"\\\\]?$"},
    "format_date": {"type": "string", "format": "date"},
    "format_date_time": {"type": "string", "format": "date-time"},
    "format_time": {"type": "string", "format": "time"},
    "format_uuid": {"type": "string", "format": "uuid"},
    "integer_exclusive": {"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 1000},
    "number_bounds": {"type": "number", "minimum": -2.5, "maximum": 7.25},
    "tuple": {"type": "array", "prefixItems": [WORD, {"type": "integer", "minimum": 0, "maximum": 99},
                                               {"type": "boolean"}], "items": False},
    "array_of_objects": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": ["integer", "null"], "minimum": 0, "maximum": 5}},
        "required": ["ok"], "additionalProperties": False}},
    "optional_properties": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"},
                                                             "c": {"type": "integer", "minimum": 0, "maximum": 3}},
                            "additionalProperties": False},
    "string_lengths": {"type": "string", "minLength": 2, "maxLength": 5},
    "all_of_single": {"allOf": [{"$ref": "#/$defs/flag"}], "$defs": {"flag": {"type": "boolean"}}},
    "type_list": {"type": ["boolean", "null", "integer"], "minimum": 0, "maximum": 99},
}


def format_checker() -> jsonschema.FormatChecker:
    """jsonschema's checkers, plus Python's own parser for time and date-time (jsonschema
    checks those only when rfc3339-validator is installed)."""
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER

    @checker.checks("date-time", raises=ValueError)
    def _date_time(s):
        return not isinstance(s, str) or (re.fullmatch(r".+[Tt].+([Zz]|[+-]\d\d:\d\d)", s) is not None
                                          and datetime.datetime.fromisoformat(s.replace("z", "Z")) is not None)

    @checker.checks("time", raises=ValueError)
    def _time(s):
        return not isinstance(s, str) or (re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)", s) is not None
                                          and datetime.time.fromisoformat(s.replace("z", "Z")) is not None)

    return checker


def validator(schema: dict) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=format_checker())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    def __init__(self, model: pathlib.Path, *args: str):
        if not FERROX or not pathlib.Path(FERROX).exists():
            pytest.skip("FERROX_BIN is not set to the built ferrox")
        if not model.exists():
            pytest.skip(f"{model} is absent (tests/model/make_tiny_models.py makes it)")
        self.port = free_port()
        self.log = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"ferrox-schema-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if k not in ("FERROX_CONFIG", "FERROX_API_KEY")}
        env["XDG_CONFIG_HOME"] = "/nonexistent"
        self.proc = subprocess.Popen([FERROX, "serve", "-m", str(model), "--port", str(self.port), "-t", "2", *args],
                                     stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, env=env)
        end = time.time() + 120
        while time.time() < end:
            assert self.proc.poll() is None, self.log.read_text(errors="replace")
            try:
                if self.request("GET", "/ready")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("ferrox serve did not become ready:\n" + self.log.read_text(errors="replace"))

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw[:1] == b"{" else {})
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def llama_server():
    s = Serve(TINY / "tiny-llama.gguf", "--parallel", "4", "--chat-template", "chatml")
    yield s
    s.close()


def complete(server: Serve, seed: int, constraint: dict, max_tokens: int = MAX_TOKENS) -> dict:
    body = {"prompt": "JSON:", "max_tokens": max_tokens, "temperature": 1.0, "top_k": 0, "top_p": 1.0,
            "min_p": 0.0, "seed": seed, **constraint}
    status, reply = server.request("POST", "/v1/completions", body)
    assert status == 200, reply
    return reply["choices"][0]


def sample(server: Serve, constraint: dict, n: int, base_seed: int) -> list[dict]:
    seeds = [base_seed * 1000 + i for i in range(n)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda s: complete(server, s, constraint), seeds))


def test_the_schema_list_is_the_issue_s_size():
    assert len(SCHEMAS) >= 20
    for schema in SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_finished_sample_validates(llama_server, name):
    schema = SCHEMAS[name]
    print(f"FERROX_SCHEMA_SEED={SEED} samples={SAMPLES}")
    check = validator(schema)
    rf = {"response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}}
    choices = sample(llama_server, rf, SAMPLES, SEED + sorted(SCHEMAS).index(name))
    finished = [c for c in choices if c["finish_reason"] == "stop"]
    for c in finished:
        value = json.loads(c["text"])
        errors = [e.message for e in check.iter_errors(value)]
        assert not errors, (name, c["text"], errors)
    print(f"{name}: {len(finished)}/{len(choices)} finished within {MAX_TOKENS} tokens, all valid")
    # A random model can wander until max_tokens; most answers must still end.
    assert len(finished) >= len(choices) // 2, [c["text"] for c in choices]


def loosened(schema: dict, rule_hint: str) -> str:
    """The schema's grammar with the rule for `rule_hint` (a property's name) loosened
    to any integer: one rule of the real grammar, widened."""
    if not TOOL or not pathlib.Path(TOOL).exists():
        pytest.skip("FERROX_GRAMMAR_TOOL is not set to the built ferrox_grammar_tool")
    r = subprocess.run([TOOL], input=json.dumps({"op": "schema", "schema_text": json.dumps(schema)}) + "\n",
                       capture_output=True, text=True, timeout=60, check=True)
    gbnf = json.loads(r.stdout)["gbnf"]
    widened, n = re.subn(rf"^({rule_hint}-\d+) ::= .*$", r"\1 ::= json-integer", gbnf, count=1, flags=re.M)
    assert n == 1, gbnf
    return widened


def test_a_grammar_with_one_rule_loosened_fails_validation(llama_server):
    schema = SCHEMAS["nested_objects"]
    grammar = loosened(schema, "age")
    choices = sample(llama_server, {"grammar": grammar}, max(SAMPLES, 8), SEED + 777)
    check = validator(schema)
    invalid = [c["text"] for c in choices
               if c["finish_reason"] == "stop" and any(True for _ in check.iter_errors(json.loads(c["text"])))]
    assert invalid, "the loosened grammar's answers all validated: the conformance check could not fail"


def test_max_tokens_before_the_grammar_ends_is_length_never_stop(llama_server):
    rf = {"response_format": {"type": "json_schema",
                              "json_schema": {"name": "n", "schema": SCHEMAS["nested_objects"]}}}
    for i in range(4):
        c = complete(llama_server, SEED + i, rf, max_tokens=4)
        assert c["finish_reason"] == "length", c
        with pytest.raises(json.JSONDecodeError):
            json.loads(c["text"])


def test_json_object_mode_gives_an_object(llama_server):
    for i in range(4):
        c = complete(llama_server, SEED + 50 + i, {"response_format": {"type": "json_object"}})
        if c["finish_reason"] == "stop":
            assert isinstance(json.loads(c["text"]), dict), c["text"]
        else:
            assert c["text"].startswith("{"), c["text"]


def test_refusals_name_the_field_and_the_json_pointer(llama_server):
    base = {"prompt": "x", "max_tokens": 4}
    bad = {"type": "object", "properties": {"age": {"type": "integer", "multipleOf": 5}}}
    status, reply = llama_server.request("POST", "/v1/completions", {
        **base, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": bad}}})
    assert status == 400
    assert reply["error"]["param"] == "response_format.json_schema.schema/properties/age/multipleOf", reply
    assert "not enforced" in reply["error"]["message"]
    status, reply = llama_server.request("POST", "/v1/completions", {**base, "grammar": 'root ::= "a" @'})
    assert status == 400 and reply["error"]["param"] == "grammar", reply
    assert "grammar:1:14" in reply["error"]["message"], reply
    status, reply = llama_server.request("POST", "/v1/completions", {
        **base, "grammar": 'root ::= "a"', "response_format": {"type": "json_object"}})
    assert status == 400 and reply["error"]["param"] == "grammar", reply
    status, reply = llama_server.request("POST", "/v1/completions", {**base, "response_format": {"type": "yaml"}})
    assert status == 400 and reply["error"]["param"] == "response_format.type", reply


def test_the_openai_sdk_parses_into_a_pydantic_model():
    openai = pytest.importorskip("openai")
    pydantic = pytest.importorskip("pydantic")
    from typing import Literal

    class Weather(pydantic.BaseModel):
        city: Literal["Paris", "Oslo", "Lima"]
        celsius: int = pydantic.Field(ge=-30, le=45)
        rainy: bool

    server = Serve(TINY / "tiny-qwen2.gguf")
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="unused")
        completions = client.chat.completions
        parse = getattr(completions, "parse", None) or client.beta.chat.completions.parse
        parsed = 0
        for i in range(4):
            try:
                r = parse(model="tiny", messages=[{"role": "user", "content": "Weather in Oslo?"}],
                          response_format=Weather, max_tokens=120, temperature=1.0, seed=SEED + i)
            except openai.LengthFinishReasonError:
                continue
            w = r.choices[0].message.parsed
            assert isinstance(w, Weather) and -30 <= w.celsius <= 45, r
            parsed += 1
        assert parsed >= 2
    finally:
        server.close()
