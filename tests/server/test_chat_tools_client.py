"""Tool calls through `ferrox serve`, checked by clients and references no one
here wrote (issue 34): the official `openai` SDK reads the calls, `jsonschema`
validates their arguments against the tools' schemas, and `jinja2` renders the
tool round trip that /apply-template must equal byte for byte.

Each family is a tiny random-weight model with its vocabulary
(tests/model/make_tiny_models.py) served with a real template of the family
(ci/fetch_templates.sh): Qwen3's (Hermes: `<tool_call>{json}</tool_call>`),
Llama 3.1's (a bare `{"name", "parameters"}` object), and one per family the
server forces calls for (SERVED). Random weights write no call of their own:
`tool_choice: required` (or a named function) makes the grammar write it,
which is what these tests exercise. The markers need not be tokens of the
vocabulary: the grammar spells them byte by byte where they are not.
"""
from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

from conftest import running

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "template"))
import test_jinja_conformance  # noqa: E402  (hf_environment: the reference renderer)

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
jinja2 = pytest.importorskip("jinja2")

TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
TEMPLATES = pathlib.Path(os.environ.get("FERROX_TEMPLATES",
                                        pathlib.Path.home() / ".cache/ferrox/templates"))
# family -> (tiny model, real template, BOS text, EOS text): a random-weight
# model with the family's vocabulary (or one whose bytes spell its markers)
# and room for a prompt that lists tools. BOS and EOS are the texts of the
# vocabulary's tokens, which the reference render gets as bos_token and
# eos_token (Mistral's template writes eos_token after past calls).
# Families whose vocabulary has no tiny model of its own (GLM, Granite, whose
# tiny model has 256 positions) use
# tiny-qwen2-yarn: a random model's architecture does not change what the
# grammar writes. Not here: SmolLM3 (its cached template renders no `tools`)
# and functools (no Phi-4-mini template is cached; FireFunction v2's reads
# `functions` and `datetime`, variables no renderer sets) and deepseek
# (DeepSeek's own R1 and V3.1 templates render no `tools`; llama.cpp's R1
# template pipes a `map` into `tojson`, which Python's Jinja -- and ferrox,
# rendering as it does -- refuses: a generator is not JSON).
QWEN2 = ("<|endoftext|>", "<|endoftext|>")
LLAMA31 = ("<|begin_of_text|>", "<|end_of_text|>")
SERVED = {"hermes": ("tiny-qwen2-yarn.gguf", "Qwen-Qwen3-0.6B.jinja", *QWEN2),
          "llama3": ("tiny-llama31.gguf", "meta-llama-Llama-3.1-8B-Instruct.jinja", *LLAMA31),
          "qwen3-coder": ("tiny-qwen2-yarn.gguf", "Qwen3-Coder.jinja", *QWEN2),
          "glm": ("tiny-qwen2-yarn.gguf", "GLM-4.6.jinja", *QWEN2),
          "harmony": ("tiny-gpt-oss.gguf", "openai-gpt-oss-120b.jinja", *QWEN2),
          "mistral": ("tiny-mistral3.gguf", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"),
          "granite": ("tiny-qwen2-yarn.gguf", "ibm-granite-granite-3.3-2B-Instruct.jinja", *QWEN2)}

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["C", "F"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["zone"], "additionalProperties": False}
# Descriptions: gpt-oss's template reads them unguarded.
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "Weather?"}]
SEEDS = range(4)
MAX_TOKENS = 200


@pytest.fixture(scope="module", params=sorted(SERVED))
def server(request):
    model, template, bos, eos = SERVED[request.param]
    if not (TEMPLATES / template).exists():
        pytest.skip(f"{TEMPLATES / template} is absent (ci/fetch_templates.sh fetches it)")
    with running("--parallel", "4", "-c", "4096", "--chat-template", str(TEMPLATES / template),
                 model=str(TINY / model)) as s:
        s.template, s.bos, s.eos = TEMPLATES / template, bos, eos
        assert f"as the {request.param} family" in s.text_log()
        yield s


def client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)


def ask(server, seed, **kw):
    return client(server).chat.completions.create(
        model="x", messages=ASK, tools=TOOLS, parallel_tool_calls=False, temperature=1,
        seed=seed, max_tokens=MAX_TOKENS, **kw)


def test_required_calls_parse_and_their_arguments_validate(server):
    finished = 0
    for seed in SEEDS:
        reply = ask(server, seed, tool_choice="required")
        choice = reply.choices[0]
        if choice.finish_reason == "length":
            continue  # cut inside the call: never reported as a call
        assert choice.finish_reason == "tool_calls", choice
        calls = choice.message.tool_calls
        assert len(calls) == 1
        call = calls[0]
        assert call.type == "function" and call.id.startswith("call_")
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
        finished += 1
    assert finished >= len(SEEDS) // 2, f"only {finished} of {len(SEEDS)} calls finished"


def test_a_named_function_is_the_one_called(server):
    finished = 0
    for seed in SEEDS:
        reply = ask(server, seed, tool_choice={"type": "function", "function": {"name": "get_time"}})
        choice = reply.choices[0]
        if choice.finish_reason == "length":
            continue
        assert choice.finish_reason == "tool_calls", choice
        assert [c.function.name for c in choice.message.tool_calls] == ["get_time"]
        jsonschema.validate(json.loads(choice.message.tool_calls[0].function.arguments), TIME)
        finished += 1
    assert finished >= len(SEEDS) // 2, f"only {finished} of {len(SEEDS)} calls finished"


def test_streamed_call_fragments_fold_into_the_whole_call(server):
    for seed in SEEDS[:2]:
        whole = ask(server, seed, tool_choice="required").choices[0]
        calls, finish = {}, None
        for chunk in ask(server, seed, tool_choice="required", stream=True):
            if not chunk.choices:
                continue
            c = chunk.choices[0]
            finish = c.finish_reason or finish
            for t in c.delta.tool_calls or []:
                slot = calls.setdefault(t.index, {"id": None, "name": None, "arguments": ""})
                slot["id"] = t.id or slot["id"]
                if t.function and t.function.name:
                    slot["name"] = t.function.name
                if t.function and t.function.arguments:
                    slot["arguments"] += t.function.arguments
        assert finish == whole.finish_reason
        # Ids differ by request (each answer's own); the calls must not.
        want = [{"name": c.function.name, "arguments": c.function.arguments}
                for c in whole.message.tool_calls or []]
        assert all(c["id"] and c["id"].startswith("call_") for c in calls.values())
        assert [{k: calls[i][k] for k in ("name", "arguments")} for i in sorted(calls)] == want


def test_tool_choice_naming_no_tool_is_a_400_naming_the_field(server):
    with pytest.raises(openai.BadRequestError) as e:
        ask(server, 1, tool_choice={"type": "function", "function": {"name": "nope"}})
    assert e.value.body["param"] == "tool_choice.function.name"


def test_the_tool_round_trip_renders_as_jinja2_does(server):
    # Mistral's template wants ids of 9 alphanumerics.
    messages = ASK + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call12345", "type": "function",
                         "function": {"name": "get_weather",
                                      "arguments": json.dumps({"city": "Oslo", "unit": "C"})}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 3}"}]
    status, got = server.post("/apply-template", {"messages": messages, "tools": TOOLS})
    assert status == 200, got
    # transformers' convention, which the template is written for: past
    # arguments as a mapping; content null as the empty string ferrox keeps.
    reference_messages = json.loads(json.dumps(messages))
    reference_messages[1]["content"] = ""
    reference_messages[1]["tool_calls"][0]["function"]["arguments"] = {"city": "Oslo", "unit": "C"}
    env = test_jinja_conformance.hf_environment()  # transformers' jinja2 setup
    want = env.from_string(server.template.read_text()).render(
        messages=reference_messages, tools=TOOLS, add_generation_prompt=True,
        bos_token=server.bos, eos_token=server.eos)
    assert got["prompt"] == want


# --- the thinking budget (docs/server.md, "Thinking budget") ---
#
# A template whose generation prompt opens `<think>` (as DeepSeek-R1's does),
# with the tiny Qwen2 vocabulary, where `</think>` is several tokens: the
# answer starts in reasoning, and random weights never close it by themselves.
THINK_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
SERVER_BUDGET = 7


@pytest.fixture(scope="module")
def thinking(tmp_path_factory):
    template = tmp_path_factory.mktemp("think") / "think.jinja"
    template.write_text(THINK_TEMPLATE)
    with running("--parallel", "4", "-c", "4096", "--chat-template", str(template),
                 "--reasoning-budget", str(SERVER_BUDGET),
                 model=str(TINY / SERVED["hermes"][0])) as s:
        assert "as the think family" in s.text_log()
        status, body = s.post("/tokenize", {"content": "</think>"})
        assert status == 200, body
        s.close_tokens = len(body["tokens"])
        yield s


def think(server, seed, **kw):
    return client(server).chat.completions.create(
        model="x", messages=ASK, temperature=1, seed=seed, max_tokens=48, logprobs=True, **kw)


def forced_close_at(choice, n, close_tokens):
    """Whether the tokens n .. n + close_tokens spell `</think>`."""
    pieces = [t.token for t in choice.logprobs.content]
    return "".join(pieces[n:n + close_tokens]) == "</think>" and "</think>" not in "".join(pieces[:n])


@pytest.mark.parametrize("budget", [0, 3, 11])
def test_a_thinking_budget_forces_the_close_after_n_tokens(thinking, budget):
    for seed in range(4):
        reply = think(thinking, seed, extra_body={"thinking_token_budget": budget})
        choice = reply.choices[0]
        assert forced_close_at(choice, budget, thinking.close_tokens), choice.logprobs
        # reasoning_tokens encodes the reasoning's text again, which for random
        # tokens can take more tokens than were generated: only its presence is
        # checked; the generated count is the logprobs' position above.
        reasoning = reply.usage.completion_tokens_details.reasoning_tokens
        assert (reasoning > 0) == (budget > 0)
        # The close ended the reasoning: what follows is content.
        message = choice.message.model_dump()
        assert (message.get("reasoning_content") or "") != "" or budget == 0
        assert message["content"] is not None


def test_the_server_default_applies_and_the_alias_is_the_same_setting(thinking):
    choice = think(thinking, 5).choices[0]
    assert forced_close_at(choice, SERVER_BUDGET, thinking.close_tokens)
    unlimited = think(thinking, 5, extra_body={"thinking_token_budget": -1}).choices[0]
    assert not forced_close_at(unlimited, SERVER_BUDGET, thinking.close_tokens)
    named = think(thinking, 6, extra_body={"thinking_token_budget": 4}).choices[0]
    alias = think(thinking, 6, extra_body={"thinking_budget_tokens": 4}).choices[0]
    assert forced_close_at(alias, 4, thinking.close_tokens)
    assert [t.token for t in alias.logprobs.content] == [t.token for t in named.logprobs.content]


@pytest.mark.parametrize("body,param", [
    ({"thinking_token_budget": -2}, "thinking_token_budget"),
    ({"thinking_token_budget": "9"}, "thinking_token_budget"),
    ({"thinking_budget_tokens": 1 << 40}, "thinking_budget_tokens"),
    ({"thinking_token_budget": 3, "thinking_budget_tokens": 3}, "thinking_budget_tokens"),
])
def test_a_bad_thinking_budget_is_a_400_naming_the_field(thinking, body, param):
    with pytest.raises(openai.BadRequestError) as e:
        think(thinking, 1, extra_body=body)
    assert e.value.body["param"] == param
