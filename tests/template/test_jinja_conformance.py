"""Renders llama.cpp's collection of real chat templates (models/templates/*.jinja
in the llama-cpp-python sdist, extracted by ci/fetch_templates.sh) with several
conversations, through Python's jinja2 set up as Hugging Face transformers sets it
up, and through ferrox's engine; compares the bytes.

Passes when every render jinja2 produces is byte-identical in ferrox, every
conversation jinja2 refuses (raise_exception, a type error) ferrox refuses too,
and a render ferrox cannot do fails with "<file>:<line>: <construct>: <why>" and
is one of KNOWN_GAPS (so a regression is caught, and a fixed gap must be removed)."""
import json
import os
import re
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

CACHE = Path(os.environ.get("FERROX_CACHE_DIR", Path.home() / ".cache" / "ferrox"))
TEMPLATES = CACHE / "templates"
RENDER = os.environ.get("FERROX_RENDER_TEMPLATE", "")
SOURCE = Path(os.environ.get("FERROX_SOURCE_DIR", Path(__file__).resolve().parents[2]))

# (template file, conversation) pairs ferrox cannot render yet; each must fail
# with a located error, never a different prompt. Keep docs/templates.md in step.
KNOWN_GAPS: set = set()


# --- jinja2 the way transformers' apply_chat_template renders -----------------
class AssistantTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


def hf_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


# --- conversations ------------------------------------------------------------
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "default": 1},
            },
            "required": ["location"],
        },
    },
}]

UNICODE = "Grüße, 世界! 🌍 — \"quoted\" and 'single' \\ back\\slash\n second line\ttab"

CONVERSATIONS = {
    "system_user": dict(messages=[{"role": "system", "content": "You are a terse assistant."},
                                  {"role": "user", "content": "What is 2+2?"}],
                        add_generation_prompt=True),
    "user_only": dict(messages=[{"role": "user", "content": "Hello there"}], add_generation_prompt=True),
    "multi_turn": dict(messages=[{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Name a colour."},
                                 {"role": "assistant", "content": "Blue."},
                                 {"role": "user", "content": "Another one?"}],
                       add_generation_prompt=True),
    "prefill": dict(messages=[{"role": "user", "content": "Write a haiku about rain."},
                              {"role": "assistant", "content": "Soft rain on"}],
                    add_generation_prompt=False),
    "unicode": dict(messages=[{"role": "user", "content": UNICODE},
                              {"role": "assistant", "content": "Ja — 好的 ✓"},
                              {"role": "user", "content": "  spaces around  "}],
                    add_generation_prompt=True),
    "content_parts": dict(messages=[{"role": "user", "content": [{"type": "text", "text": "Describe this."}]}],
                          add_generation_prompt=True),
    "tools": dict(messages=[{"role": "system", "content": "You can call tools."},
                            {"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "content": "",
                             "tool_calls": [{"id": "call_1", "type": "function",
                                             "function": {"name": "get_weather",
                                                          "arguments": {"location": "Paris", "days": 2}}}]},
                            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
                             "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
                            {"role": "user", "content": "Thanks!"}],
                  add_generation_prompt=True, tools=TOOLS),
    # OpenAI-style: arguments as a JSON string, two parallel calls, a finished turn.
    "tools_json_args": dict(messages=[{"role": "user", "content": "Weather in Paris and Oslo?"},
                                      {"role": "assistant", "content": None,
                                       "tool_calls": [{"id": "a", "type": "function",
                                                       "function": {"name": "get_weather",
                                                                    "arguments": "{\"location\": \"Paris\"}"}},
                                                      {"id": "b", "type": "function",
                                                       "function": {"name": "get_weather",
                                                                    "arguments": "{\"location\": \"Oslo\"}"}}]},
                                      {"role": "tool", "tool_call_id": "a", "content": "sunny"},
                                      {"role": "tool", "tool_call_id": "b", "content": "rain, 3.0 °C"},
                                      {"role": "assistant", "content": "Paris is sunny; Oslo has rain."}],
                            add_generation_prompt=False, tools=TOOLS),
}


def context(conv):
    # transformers: render(messages=..., tools=..., documents=..., add_generation_prompt=...,
    # **special_tokens_map); tools and documents are None when not given.
    return {"messages": conv["messages"], "tools": conv.get("tools"), "documents": None,
            "add_generation_prompt": conv["add_generation_prompt"],
            "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


LOCATED = re.compile(r"^.+\.jinja:\d+: [^:]+: .+")


def templates():
    return sorted(TEMPLATES.glob("*.jinja")) if TEMPLATES.is_dir() else []


@pytest.fixture(scope="module")
def results():
    if not templates():
        pytest.skip(f"no templates in {TEMPLATES} (run ci/fetch_templates.sh)")
    if not RENDER or not Path(RENDER).exists():
        pytest.skip("FERROX_RENDER_TEMPLATE is not set (run through ctest)")
    env = hf_environment()
    jobs, reference = [], []
    for path in templates():
        try:
            compiled = env.from_string(path.read_text(encoding="utf-8"))
        except Exception as e:  # noqa: BLE001 - jinja2 itself cannot compile it
            compiled, compile_error = None, f"{type(e).__name__}: {e}"
        for name, conv in CONVERSATIONS.items():
            ctx = context(conv)
            if compiled is None:
                ref = (False, compile_error)
            else:
                try:
                    ref = (True, compiled.render(**ctx))
                except Exception as e:  # noqa: BLE001 - the template refuses this conversation
                    ref = (False, f"{type(e).__name__}: {e}")
            jobs.append({"template": str(path), "context": ctx})
            reference.append((path.name, name, ref))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(jobs, f, ensure_ascii=False)
        jobs_path = f.name
    try:
        out = subprocess.run([RENDER, "--batch", jobs_path], capture_output=True, check=True, timeout=240)
    finally:
        os.unlink(jobs_path)
    ours = json.loads(out.stdout.decode("utf-8"))
    assert len(ours) == len(reference)
    return [(t, c, ref, mine) for (t, c, ref), mine in zip(reference, ours)]


def test_templates_match_jinja2(results):
    mismatches, refused_by_us_only, rendered_by_us_only, badly_located = [], [], [], []
    per_template = {}
    for template, conv, (ref_ok, ref), mine in results:
        ok = True
        if ref_ok and mine["ok"]:
            if mine["text"] != ref:
                ok = False
                mismatches.append((template, conv, ref, mine["text"]))
        elif ref_ok and not mine["ok"]:
            ok = False
            refused_by_us_only.append((template, conv, mine["error"]))
            if not LOCATED.match(mine["error"]):
                badly_located.append((template, conv, mine["error"]))
        elif not ref_ok and mine["ok"]:
            ok = False
            rendered_by_us_only.append((template, conv, ref))
        per_template.setdefault(template, []).append(ok)

    identical = sum(all(v) for v in per_template.values())
    renders = sum(1 for r in results if r[2][0])
    same = renders - len(mismatches) - len(refused_by_us_only)
    print(f"\ntemplate conformance: {identical}/{len(per_template)} templates identical to jinja2 "
          f"over {len(CONVERSATIONS)} conversations; {same}/{renders} renders byte-identical; "
          f"{sum(1 for r in results if not r[2][0])} refused by both")
    for t, c, err in refused_by_us_only:
        print(f"  ferrox cannot render {t} [{c}]: {err}")
    for t, c, ref, got in mismatches[:10]:
        print(f"  MISMATCH {t} [{c}]:\n    jinja2: {ref!r}\n    ferrox: {got!r}")
    for t, c, ref in rendered_by_us_only[:10]:
        print(f"  jinja2 refuses but ferrox renders {t} [{c}]: {ref}")

    assert not mismatches, f"{len(mismatches)} renders differ from jinja2"
    assert not rendered_by_us_only, f"{len(rendered_by_us_only)} conversations jinja2 refuses rendered anyway"
    assert not badly_located, f"errors without file:line: construct: {badly_located}"
    unexpected = {(t, c) for t, c, _ in refused_by_us_only} - KNOWN_GAPS
    assert not unexpected, f"ferrox fails to render: {sorted(unexpected)}"
    fixed = KNOWN_GAPS - {(t, c) for t, c, _ in refused_by_us_only}
    assert not fixed, f"known gaps that now render (remove them from KNOWN_GAPS): {sorted(fixed)}"


def test_enough_templates_were_compared(results):
    # The sdist holds 71; a broken extraction must not pass as "all identical".
    assert len({r[0] for r in results}) >= 60
