"""Tools, JSON-schema output and reasoning on /v1/responses and /v1/messages,
driven by the clients agents use (issue 34, "Real clients"): the official
`openai` SDK (responses.create with tools, streamed and not; text.format
json_schema; chat.completions.parse with a Pydantic model), the official
`anthropic` SDK (messages with tools, streamed and not), the OpenAI Agents SDK
(a two-tool agent loop over Chat Completions and over Responses) and LangChain
(`ChatOpenAI.bind_tools`, `.with_structured_output`). `jsonschema` validates
every call's arguments and every structured answer against its schema.

The model is a tiny random-weight one with Qwen2's vocabulary
(tests/model/make_tiny_models.py) served with Qwen3's real template, and QwQ's
(whose prompt opens a `<think>` block) for reasoning. Random weights write no
call of their own: `tool_choice` required (OpenAI) or any (Anthropic) makes
the grammar write it, and greedy decoding makes each answer the same twice.

These clients are CI's dependencies (ci/install-deps.sh): a missing one fails
this file at import, never skips it.
"""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
from typing import Annotated, Literal

import anthropic
import jsonschema
import openai
import pytest
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel,
                    Runner, function_tool, set_tracing_disabled)
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from conftest import running

TINY = pathlib.Path(os.environ.get("FERROX_TINY_MODELS",
                                   pathlib.Path.home() / ".cache/ferrox/tiny-models"))
TEMPLATES = pathlib.Path(os.environ.get("FERROX_TEMPLATES",
                                        pathlib.Path.home() / ".cache/ferrox/templates"))
MODEL = "tiny-qwen2-yarn.gguf"
QWEN3 = "Qwen-Qwen3-0.6B.jinja"
QWQ = "Qwen-QwQ-32B.jinja"  # its generation prompt opens <think>

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["C", "F"]}},
           "required": ["city", "unit"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["zone"], "additionalProperties": False}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
# The same two tools in each API's shape.
RESPONSES_TOOLS = [{"type": "function", "name": n, "description": f"{n} of a place",
                    "parameters": s, "strict": True} for n, s in SCHEMAS.items()]
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "description": f"{n} of a place",
                                                "parameters": s, "strict": True}}
              for n, s in SCHEMAS.items()]
# Anthropic's tools have no `strict`, so their chat twins have none either.
CHAT_TOOLS_LOOSE = [{"type": "function", "function": {"name": n, "description": f"{n} of a place",
                                                      "parameters": s}}
                    for n, s in SCHEMAS.items()]
ANTHROPIC_TOOLS = [{"name": n, "description": f"{n} of a place", "input_schema": s}
                   for n, s in SCHEMAS.items()]
REPORT = {"type": "object",
          "properties": {"summary": {"type": "string", "maxLength": 20},
                         "score": {"type": "integer", "minimum": 0, "maximum": 9},
                         "tags": {"type": "array", "items": {"enum": ["hot", "cold", "wet"]},
                                  "maxItems": 3}},
          "required": ["summary", "score", "tags"], "additionalProperties": False}
GREEDY = {"temperature": 0}
# Room for a forced call: the grammar lets a random model indent (up to 20
# blanks after each newline), and a cut call is no call.
CALL_BUDGET = 400

set_tracing_disabled(True)


class Report(BaseModel):
    summary: str = Field(max_length=20)
    score: int = Field(ge=0, le=9)
    tags: list[Literal["hot", "cold", "wet"]] = Field(max_length=3)


def serve(template):
    if not (TEMPLATES / template).exists():
        pytest.fail(f"{TEMPLATES / template} is absent (ci/fetch_templates.sh fetches it)")
    return running("--parallel", "4", "-c", "4096", "--chat-template", str(TEMPLATES / template),
                   model=str(TINY / MODEL))


@pytest.fixture(scope="module")
def server():
    with serve(QWEN3) as s:
        yield s


@pytest.fixture(scope="module")
def thinker():
    with serve(QWQ) as s:
        yield s


def oai(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)


def claude(server):
    return anthropic.Anthropic(base_url=server.base, api_key="none", max_retries=0)


def collapsed(types):
    """Event types with runs of one type (the deltas) counted once."""
    out = []
    for t in types:
        if not out or out[-1] != t:
            out.append(t)
    return out


# --- /v1/responses ---------------------------------------------------------

def test_responses_required_call_parses_validates_and_streams_the_same(server):
    c = oai(server)
    kw = dict(model="x", input="Weather in Oslo?", tools=RESPONSES_TOOLS, tool_choice="required",
              parallel_tool_calls=False, max_output_tokens=CALL_BUDGET, **GREEDY)
    whole = c.responses.create(**kw)
    assert whole.status == "completed"
    [call] = whole.output
    assert call.type == "function_call" and call.status == "completed"
    assert call.call_id.startswith("call_") and call.id.startswith("fc_")
    jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    assert whole.tool_choice == "required" and [t.name for t in whole.tools] == list(SCHEMAS)
    assert whole.parallel_tool_calls is False

    events = list(c.responses.create(stream=True, **kw))
    assert collapsed(e.type for e in events) == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = events[2].item
    # (Call ids differ across requests: they are seeded by the request id.)
    assert (added.type, added.name, added.arguments) == ("function_call", call.name, "")
    assert added.call_id.startswith("call_")
    assert added.call_id == events[-1].response.output[0].call_id
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert deltas == done.arguments == call.arguments
    assert events[-1].response.output[0].arguments == call.arguments

    # The SDK's stream helper checks that items and ids line up.
    with c.responses.stream(**kw) as stream:
        final = stream.get_final_response()
    assert final.output[0].arguments == call.arguments


def test_responses_named_function_is_the_one_called(server):
    r = oai(server).responses.create(
        model="x", input="Time?", tools=RESPONSES_TOOLS, parallel_tool_calls=False,
        tool_choice={"type": "function", "name": "get_time"}, max_output_tokens=CALL_BUDGET,
        **GREEDY)
    assert [(o.type, o.name) for o in r.output] == [("function_call", "get_time")]
    jsonschema.validate(json.loads(r.output[0].arguments), TIME)


def test_responses_tool_round_trip_is_the_chat_prompt(server):
    """function_call and function_call_output items go back through the
    template as Chat Completions' tool_calls and tool messages do."""
    c = oai(server)
    first = c.responses.create(model="x", input="Weather in Oslo?", tools=RESPONSES_TOOLS,
                               tool_choice="required", parallel_tool_calls=False,
                               max_output_tokens=CALL_BUDGET, **GREEDY)
    [call] = first.output
    history = [{"role": "user", "content": "Weather in Oslo?"},
               call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": "12 C, rain"}]
    second = c.responses.create(model="x", input=history, tools=RESPONSES_TOOLS,
                                max_output_tokens=4, **GREEDY)
    chat = c.chat.completions.create(
        model="x", tools=CHAT_TOOLS, max_tokens=4, **GREEDY,
        messages=[{"role": "user", "content": "Weather in Oslo?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": call.call_id, "type": "function",
                       "function": {"name": call.name, "arguments": call.arguments}}]},
                  {"role": "tool", "tool_call_id": call.call_id, "content": "12 C, rain"}])
    assert second.usage.input_tokens == chat.usage.prompt_tokens
    assert second.usage.input_tokens > first.usage.input_tokens


def test_responses_text_format_json_schema_holds_the_answer(server):
    # (json_object is left to the unit test: a random model's free-form
    # object need not end within any budget.)
    fmt = {"type": "json_schema", "name": "report", "schema": REPORT, "strict": True}
    kw = dict(model="x", input="Report on the weather as JSON.", text={"format": fmt},
              max_output_tokens=200, **GREEDY)
    c = oai(server)
    r = c.responses.create(**kw)
    assert r.status == "completed", r.output_text
    jsonschema.validate(json.loads(r.output_text), REPORT)
    assert r.text.format.name == "report"
    events = list(c.responses.create(stream=True, **kw))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == \
        r.output_text


def test_responses_parse_with_a_pydantic_model(server):
    r = oai(server).responses.parse(model="x", input="Report on the weather.", text_format=Report,
                                    max_output_tokens=200, **GREEDY)
    assert isinstance(r.output_parsed, Report)
    jsonschema.validate(r.output_parsed.model_dump(), REPORT)


def test_responses_reasoning_item_and_its_events(thinker):
    c = oai(thinker)
    kw = dict(model="x", input="Why is the sky blue?", reasoning={"effort": "low"},
              max_output_tokens=24, **GREEDY)
    whole = c.responses.create(**kw)
    [item] = whole.output  # the budget ends inside the reasoning QwQ's prompt opened
    assert item.type == "reasoning" and item.id.startswith("rs_")
    text = item.content[0].text
    assert text and "<think>" not in text
    assert whole.reasoning.effort == "low"
    chat = c.chat.completions.create(model="x", messages=[{"role": "user",
                                                           "content": "Why is the sky blue?"}],
                                     reasoning_effort="low", max_tokens=24, **GREEDY,
                                     extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert chat.choices[0].message.reasoning_content == text
    assert whole.usage.output_tokens_details.reasoning_tokens == \
        chat.usage.completion_tokens_details.reasoning_tokens > 0

    events = list(c.responses.create(stream=True, **kw))
    assert collapsed(e.type for e in events) == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.content_part.done",
        "response.output_item.done", "response.incomplete"]
    assert "".join(e.delta for e in events if e.type == "response.reasoning_text.delta") == text
    # Given back as input, the reasoning item is the assistant turn's reasoning.
    again = c.responses.create(model="x", max_output_tokens=2, **GREEDY, input=[
        {"role": "user", "content": "Why?"}, item.model_dump(exclude_none=True),
        {"role": "assistant", "content": "Light."}, {"role": "user", "content": "More."}])
    assert again.status == "incomplete"


@pytest.mark.parametrize("kw, param", [
    (dict(tools=[{"type": "web_search"}]), "tools[0].type"),
    (dict(tools=RESPONSES_TOOLS, tool_choice={"type": "function", "name": "nope"}),
     "tool_choice.name"),
    (dict(tool_choice="required"), "tool_choice"),
    (dict(text={"format": {"type": "json_schema", "name": "r",
                           "schema": {"type": "object", "properties": {
                               "n": {"type": "number", "multipleOf": 3}}}}}),
     "text.format.schema/properties/n/multipleOf"),
    (dict(reasoning={"effort": "extreme"}), "reasoning.effort"),
    (dict(input=[{"type": "web_search_call", "id": "ws_1"}]), "input[0].type"),
])
def test_responses_refusals_name_the_field(server, kw, param):
    kw.setdefault("input", "hi")
    with pytest.raises(openai.BadRequestError) as e:
        oai(server).responses.create(model="x", max_output_tokens=4, **kw)
    assert e.value.body["param"] == param, e.value.body
    assert e.value.body["message"].startswith(f"'{param}'")


# --- /v1/chat/completions through the SDK's parse helper -------------------

def test_chat_completions_parse_with_a_pydantic_model(server):
    c = oai(server)
    parse = c.chat.completions.parse if hasattr(c.chat.completions, "parse") \
        else c.beta.chat.completions.parse
    r = parse(model="x", messages=[{"role": "user", "content": "Report."}],
              response_format=Report, max_tokens=200, **GREEDY)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Report)
    jsonschema.validate(parsed.model_dump(), REPORT)


# --- /v1/messages ----------------------------------------------------------

def test_messages_tool_use_parses_validates_and_streams_the_same(server):
    c = claude(server)
    kw = dict(model="x", max_tokens=CALL_BUDGET, tools=ANTHROPIC_TOOLS,
              tool_choice={"type": "any", "disable_parallel_tool_use": True},
              messages=[{"role": "user", "content": "Weather in Oslo?"}], extra_body=GREEDY)
    whole = c.messages.create(**kw)
    assert whole.stop_reason == "tool_use"
    [block] = whole.content
    assert block.type == "tool_use" and block.name in SCHEMAS and block.id
    jsonschema.validate(block.input, SCHEMAS[block.name])

    with c.messages.stream(**kw) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [(b.type, b.name, b.input) for b in final.content] == \
        [("tool_use", block.name, block.input)]

    raw = list(c.messages.create(stream=True, **kw))
    assert collapsed(e.type for e in raw) == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    assert raw[1].content_block.type == "tool_use" and raw[1].content_block.input == {}
    partial = "".join(e.delta.partial_json for e in raw if e.type == "content_block_delta")
    assert all(e.delta.type == "input_json_delta" for e in raw if e.type == "content_block_delta")
    assert json.loads(partial) == block.input


def test_messages_named_tool_and_round_trip_is_the_chat_prompt(server):
    c = claude(server)
    first = c.messages.create(model="x", max_tokens=CALL_BUDGET, tools=ANTHROPIC_TOOLS,
                              tool_choice={"type": "tool", "name": "get_time",
                                           "disable_parallel_tool_use": True},
                              messages=[{"role": "user", "content": "Time?"}], extra_body=GREEDY)
    [call] = first.content
    assert call.name == "get_time"
    jsonschema.validate(call.input, TIME)
    msgs = [{"role": "user", "content": "Time?"},
            {"role": "assistant", "content": [call.model_dump(exclude_none=True)]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                          "content": "09:00"}]}]
    second = c.messages.create(model="x", max_tokens=2, tools=ANTHROPIC_TOOLS, messages=msgs,
                               extra_body=GREEDY)
    counted = c.messages.count_tokens(model="x", tools=ANTHROPIC_TOOLS, messages=msgs)
    chat = oai(server).chat.completions.create(
        model="x", tools=CHAT_TOOLS_LOOSE, max_tokens=2, **GREEDY,
        messages=[{"role": "user", "content": "Time?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": call.id, "type": "function",
                       "function": {"name": "get_time", "arguments": json.dumps(call.input)}}]},
                  {"role": "tool", "tool_call_id": call.id, "content": "09:00"}])
    assert counted.input_tokens == chat.usage.prompt_tokens == \
        second.usage.input_tokens + second.usage.cache_read_input_tokens


def test_messages_count_tokens_counts_the_tools(server):
    c = claude(server)
    msgs = [{"role": "user", "content": "Weather?"}]
    bare = c.messages.count_tokens(model="x", messages=msgs).input_tokens
    with_tools = c.messages.count_tokens(model="x", messages=msgs, tools=ANTHROPIC_TOOLS)
    chat = oai(server).chat.completions.create(model="x", messages=msgs, tools=CHAT_TOOLS_LOOSE,
                                               max_tokens=1, **GREEDY)
    assert with_tools.input_tokens == chat.usage.prompt_tokens > bare


def test_messages_thinking_blocks_and_deltas(thinker):
    c = claude(thinker)
    kw = dict(model="x", max_tokens=24, thinking={"type": "enabled", "budget_tokens": 1024},
              messages=[{"role": "user", "content": "Why is the sky blue?"}], extra_body=GREEDY)
    whole = c.messages.create(**kw)
    [block] = whole.content
    assert block.type == "thinking" and block.thinking and "<think>" not in block.thinking
    assert whole.stop_reason == "max_tokens"
    raw = list(c.messages.create(stream=True, **kw))
    assert collapsed(e.type for e in raw) == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    assert raw[1].content_block.type == "thinking"
    assert "".join(e.delta.thinking for e in raw if e.type == "content_block_delta") == \
        block.thinking
    with c.messages.stream(**kw) as s:
        assert s.get_final_message().content[0].thinking == block.thinking


@pytest.mark.parametrize("kw, words", [
    (dict(tools=[{"type": "bash_20250124", "name": "bash"}]), "'tools[0].type'"),
    (dict(tools=ANTHROPIC_TOOLS, tool_choice={"type": "tool", "name": "nope"}),
     "'tool_choice.name' 'nope' names no tool"),
    (dict(tools=[{"name": "f"}]), "'tools[0].input_schema' is required"),
    (dict(thinking={"type": "enabled"}), "'thinking.budget_tokens' is required"),
])
def test_messages_refusals_name_the_field(server, kw, words):
    with pytest.raises(anthropic.BadRequestError) as e:
        claude(server).messages.create(model="x", max_tokens=4, **kw,
                                       messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["message"].startswith(words), e.value.body


# --- OpenAI Agents SDK -----------------------------------------------------

@pytest.mark.parametrize("api", ["chat_completions", "responses"])
def test_agents_sdk_two_tool_loop(server, api):
    """Turn 1: tool_choice required makes the model call one of two tools,
    which the SDK runs; turn 2 (the SDK resets the choice to auto) sends the
    result back and the output type's schema holds the final answer."""
    ran = []

    # Bounded arguments: a random model would otherwise write a string until
    # max_tokens.
    @function_tool
    def get_weather(city: Annotated[str, Field(max_length=8)], unit: Literal["C", "F"]) -> str:
        """The weather in a city."""
        ran.append(("get_weather", city, unit))
        return f"12 {unit}, rain"

    @function_tool
    def get_time(zone: Annotated[str, Field(pattern="^[A-Z]{3}$")]) -> str:
        """The time in a zone."""
        ran.append(("get_time", zone))
        return "09:00"

    client = openai.AsyncOpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
    model = (OpenAIChatCompletionsModel if api == "chat_completions" else OpenAIResponsesModel)(
        model="x", openai_client=client)
    agent = Agent(name="forecaster", instructions="Use a tool, then report.", model=model,
                  tools=[get_weather, get_time], output_type=Report,
                  model_settings=ModelSettings(tool_choice="required", temperature=0,
                                               parallel_tool_calls=False, max_tokens=200))
    result = asyncio.run(Runner.run(agent, "Weather in Oslo?", max_turns=3))
    assert len(ran) == 1, ran
    assert isinstance(result.final_output, Report)
    jsonschema.validate(result.final_output.model_dump(), REPORT)
    kinds = [i.type for i in result.new_items]
    assert kinds == ["tool_call_item", "tool_call_output_item", "message_output_item"], kinds
    assert len(result.raw_responses) == 2


# --- LangChain ---------------------------------------------------------------

def lc(server):
    return ChatOpenAI(base_url=server.base + "/v1", api_key="none", model="x", temperature=0,
                      max_tokens=200, max_retries=0)


@pytest.mark.parametrize("choice, names", [("required", set(SCHEMAS)),
                                           ("get_time", {"get_time"})])
def test_langchain_bind_tools(server, choice, names):
    msg = lc(server).bind_tools(CHAT_TOOLS, tool_choice=choice).invoke("Weather in Oslo?")
    assert msg.tool_calls, msg
    for call in msg.tool_calls:
        assert call["name"] in names and call["id"]
        jsonschema.validate(call["args"], SCHEMAS[call["name"]])


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_with_structured_output(server, method):
    out = lc(server).with_structured_output(Report, method=method).invoke("Report on the weather.")
    assert isinstance(out, Report)
    jsonschema.validate(out.model_dump(), REPORT)
