"""examples/python run as written, on the tiny llama model."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, input=stdin,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def test_generate_example_streams_and_reports(tiny_llama_path, tiny_llama):
    done = run(str(EXAMPLES / "generate.py"), str(tiny_llama_path), "Hello", "-n", "8",
               "--seed", "4", "-t", "2")
    expected = tiny_llama.generate("Hello", max_tokens=8, seed=4)
    assert done.stdout == "Hello" + expected.text + "\n"
    assert f"{len(expected.tokens)} tokens ({expected.finish_reason})" in done.stderr


def test_batched_example_prints_one_line_per_prompt(tiny_llama_path):
    done = run(str(EXAMPLES / "batched.py"), str(tiny_llama_path), "-n", "4", "one", "two", "three")
    assert len(done.stdout.splitlines()) >= 3 and "3 sequences" in done.stderr


def test_chat_example_answers_each_line(tiny_qwen2_path):
    done = run(str(EXAMPLES / "chat.py"), str(tiny_qwen2_path), "-n", "4", stdin="hi\nagain\n")
    assert done.stdout.count("> ") == 3  # two turns, then the prompt that meets the end


def test_structured_example_writes_json_of_its_schema(tiny_llama_path, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "object", "properties": {"k": {"enum": [1, 2, 3]}}, "required": ["k"],
              "additionalProperties": False}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    done = run(str(EXAMPLES / "structured.py"), str(tiny_llama_path), "JSON:", "--schema",
               str(path), "-n", "60", "--seed", "2", "-t", "2")
    jsonschema.validate(json.loads(done.stdout), schema)
    bad = tmp_path / "bad.gbnf"
    bad.write_text('root ::= "a" @\n')
    refused = subprocess.run([sys.executable, str(EXAMPLES / "structured.py"), str(tiny_llama_path),
                              "x", "--grammar", str(bad)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "grammar:1:14" in refused.stderr, refused.stderr
