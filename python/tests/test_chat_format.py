"""Template variables and answer parsing through the binding (API 0.5): the
template's own render by jinja2 is the reference for template_kwargs, and the
answers are hand-written in each family's spelling."""
from __future__ import annotations

import json

import pytest

import ferrox

# A template that shows the variable only when given: kwargs must reach it.
THINKING = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
            "{% if enable_thinking is defined %}thinking={{ enable_thinking }}\n{% endif %}")


def test_template_kwargs_reach_the_template_as_jinja2_renders_them(tiny_llama):
    jinja2 = pytest.importorskip("jinja2")
    messages = [{"role": "user", "content": "hi"}]
    for kwargs in ({"enable_thinking": False}, {"enable_thinking": True}, None):
        got = tiny_llama.apply_chat_template(messages, chat_template=THINKING,
                                             template_kwargs=kwargs).text
        want = jinja2.Environment().from_string(THINKING).render(messages=messages,
                                                                 **(kwargs or {}))
        assert got == want


def test_a_reserved_template_variable_is_refused_by_name(tiny_llama):
    with pytest.raises(ferrox.InvalidArgumentError, match="messages"):
        tiny_llama.apply_chat_template([{"role": "user", "content": "hi"}],
                                       template_kwargs={"messages": []})
    with pytest.raises(TypeError):
        tiny_llama.apply_chat_template([{"role": "user", "content": "hi"}], template_kwargs=[1])


def test_answers_split_into_content_reasoning_and_calls(tiny_llama):
    hermes = ('<think>plan</think>\n\nChecking.\n<tool_call>\n{"name": "get_weather", '
              '"arguments": {"city": "Oslo"}}\n</tool_call>')
    a = tiny_llama.parse_answer(hermes, family="hermes", id_seed=7)
    assert a.family == "hermes"
    assert a.reasoning == "plan"
    assert a.content.strip() == "Checking."
    assert [c["name"] for c in a.tool_calls] == ["get_weather"]
    assert json.loads(a.tool_calls[0]["arguments"]) == {"city": "Oslo"}
    assert a.tool_calls[0]["id"].startswith("call_")
    assert tiny_llama.parse_answer(hermes, family="hermes", id_seed=7) == a  # same seed, same ids

    # A malformed call is content, never dropped.
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>'
    b = tiny_llama.parse_answer(broken, family="hermes")
    assert b.tool_calls == [] and b.content == broken

    # The model's own template (tiny-llama's: ChatML) reads no calls.
    plain = tiny_llama.parse_answer(hermes)
    assert plain.tool_calls == []


def test_parse_refuses_bad_arguments_by_name(tiny_llama):
    with pytest.raises(ferrox.InvalidArgumentError, match="nosuch"):
        tiny_llama.parse_answer("x", family="nosuch")
    with pytest.raises(ferrox.InvalidArgumentError, match="not both"):
        tiny_llama.parse_answer("x", family="hermes", chat_template="{{ x }}")
    with pytest.raises(ferrox.InvalidArgumentError, match="id_seed"):
        tiny_llama.parse_answer("x", family="hermes", id_seed=-1)
