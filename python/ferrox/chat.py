"""Chat prompts: a conversation rendered by ferrox_chat_apply_template.

The same renderer as `ferrox run --chat`, `ferrox chat` and the server: the
model's template (tokenizer.chat_template; its family's built-in when the file
has none), a Jinja source, or a built-in by name. Text that came from the
conversation never becomes control tokens; the template's own text keeps them.
"""
from __future__ import annotations

import ctypes
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _lib
from ._validate import as_c_string, as_text
from .errors import InvalidArgumentError, check


@dataclass(frozen=True)
class ChatPrompt:
    """A rendered conversation.

    text: the rendered prompt; tokens: its token ids (BOS as the engine adds
    it); template: which template rendered it ("tokenizer.chat_template",
    "builtin:NAME" or the origin given); segments: (text, parse_special)
    pieces that concatenate to `text`: the template's own text (True) and the
    conversation's (False).
    """

    text: str
    tokens: List[int]
    template: str
    segments: List[Tuple[str, bool]]


def _simple(messages: Sequence[Any]) -> bool:
    """Role/content pairs with string contents go as ferrox_chat_message;
    anything richer (names, tool calls, content parts) as OpenAI JSON."""
    return all(
        isinstance(m, Mapping) and set(m.keys()) <= {"role", "content"}
        and isinstance(m.get("content"), (str, bytes))
        for m in messages
    )


class _Arguments:
    """The checked arguments of one render, kept alive for the C call."""

    def __init__(self, messages: Any, tools: Any, chat_template: Optional[str],
                 template_name: Optional[str], add_generation_prompt: bool,
                 template_kwargs: Optional[Mapping[str, Any]] = None):
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise TypeError(f"messages must be a list of dicts, not {type(messages).__name__}")
        if len(messages) > _lib.CHAT_MAX_MESSAGES:
            raise InvalidArgumentError(
                f"messages has {len(messages)} entries; at most {_lib.CHAT_MAX_MESSAGES}"
            )
        if not isinstance(add_generation_prompt, bool):
            raise TypeError("add_generation_prompt must be a bool")
        if chat_template is not None and template_name is not None:
            raise InvalidArgumentError("give chat_template or template_name, not both")
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise TypeError(f"messages[{i}] must be a dict, not {type(m).__name__}")
            role = m.get("role")
            if not isinstance(role, str):
                raise TypeError(f"messages[{i}]['role'] must be a str, not {type(role).__name__}")
            as_c_string(f"messages[{i}]['role']", role, _lib.CHAT_MAX_ROLE, allow_empty=False)
        self.params = _lib.ChatParams()
        _lib.init_params(self.params)
        self.params.add_generation_prompt = int(add_generation_prompt)
        self._keep: List[Any] = []
        if _simple(messages):
            self._pairs(messages)
        else:
            self.params.messages_json, self.params.messages_json_len = self._json(
                "messages", messages)
        if tools is not None:
            if not isinstance(tools, (list, tuple)):
                raise TypeError(f"tools must be a list, not {type(tools).__name__}")
            self.params.tools_json, self.params.tools_json_len = self._json("tools", tools)
        if template_kwargs is not None:
            if not isinstance(template_kwargs, Mapping):
                raise TypeError(
                    f"template_kwargs must be a dict, not {type(template_kwargs).__name__}")
            self.params.kwargs_json, self.params.kwargs_json_len = self._json(
                "template_kwargs", dict(template_kwargs))
        if chat_template is not None:
            self.params.chat_template = self._c_string(
                "chat_template", chat_template, _lib.CHAT_MAX_JSON)
        if template_name is not None:
            self.params.template_name = self._c_string("template_name", template_name, 64)

    def _c_string(self, name: str, value: Any, limit: int) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        data = as_c_string(name, value, limit, allow_empty=False)
        self._keep.append(data)
        return data

    def _pairs(self, messages: Sequence[Mapping]) -> None:
        array = (_lib.ChatMessage * max(1, len(messages)))()
        total = 0
        for i, m in enumerate(messages):
            role = as_c_string(f"messages[{i}]['role']", m["role"], _lib.CHAT_MAX_ROLE)
            content = as_text(f"messages[{i}]['content']", m["content"], _lib.CHAT_MAX_CONTENT)
            total += len(content)
            if total > _lib.CHAT_MAX_CONTENT:
                raise InvalidArgumentError(
                    f"the messages' contents are {total} bytes by messages[{i}]; at most "
                    f"{_lib.CHAT_MAX_CONTENT} in all"
                )
            buf = ctypes.create_string_buffer(content, len(content)) if content else None
            self._keep.extend((role, buf))
            array[i].role = role
            array[i].content = ctypes.cast(buf, ctypes.c_void_p) if buf else None
            array[i].content_len = len(content)
        self._keep.append(array)
        self.params.messages = array
        self.params.n_messages = len(messages)

    def _json(self, name: str, value: Any) -> Tuple[Optional[int], int]:
        data = json.dumps(value, ensure_ascii=False).encode("utf-8")
        if len(data) > _lib.CHAT_MAX_JSON:
            raise InvalidArgumentError(
                f"{name} is {len(data)} bytes as JSON; at most {_lib.CHAT_MAX_JSON}"
            )
        buf = ctypes.create_string_buffer(data, len(data))
        self._keep.append(buf)
        return ctypes.cast(buf, ctypes.c_void_p).value, len(data)


def render(model_pointer: int, messages: Any, tools: Any = None,
           chat_template: Optional[str] = None, template_name: Optional[str] = None,
           add_generation_prompt: bool = True,
           template_kwargs: Optional[Mapping[str, Any]] = None) -> ChatPrompt:
    """ferrox_chat_apply_template over checked arguments (the model's `use()` held)."""
    args = _Arguments(messages, tools, chat_template, template_name, add_generation_prompt,
                      template_kwargs)
    status = _lib.new_status()
    raw = ctypes.c_void_p()
    code = _lib.lib.ferrox_chat_apply_template(model_pointer, ctypes.byref(args.params),
                                               ctypes.byref(raw), status)
    check(code, status, "chat template")
    try:
        n = ctypes.c_size_t()
        text_ptr = _lib.lib.ferrox_chat_prompt_text(raw, ctypes.byref(n))
        text = ctypes.string_at(text_ptr, n.value)
        ids = _lib.lib.ferrox_chat_prompt_tokens(raw, ctypes.byref(n))
        tokens = ids[: n.value] if n.value else []
        segs = _lib.lib.ferrox_chat_prompt_segments(raw, ctypes.byref(n))
        segments = [
            (ctypes.string_at(segs[i].text, segs[i].len).decode("utf-8", errors="replace")
             if segs[i].len else "", bool(segs[i].parse_special))
            for i in range(n.value)
        ]
        origin = _lib.lib.ferrox_chat_prompt_template(raw) or b""
    finally:
        _lib.lib.ferrox_chat_prompt_free(raw)
    return ChatPrompt(text.decode("utf-8", errors="replace"), list(tokens),
                      origin.decode("utf-8", errors="replace"), segments)


@dataclass
class ParsedAnswer:
    """An answer split as its template's family writes it (ferrox_chat_parse)."""

    family: str
    content: str
    reasoning: str
    tool_calls: List[Dict[str, str]]  # {"id", "name", "arguments" (JSON text)}


def parse(model_pointer: Optional[int], text: str, family: Optional[str],
          chat_template: Optional[str], starts_in_reasoning: bool, id_seed: int) -> ParsedAnswer:
    """ferrox_chat_parse over checked arguments (the model's `use()` held, or no model)."""
    data = as_text("text", text, _lib.CHAT_MAX_ANSWER)
    if family is not None and chat_template is not None:
        raise InvalidArgumentError("give family or chat_template, not both")
    if not isinstance(starts_in_reasoning, bool):
        raise TypeError("starts_in_reasoning must be a bool")
    if not isinstance(id_seed, int) or isinstance(id_seed, bool) or not 0 <= id_seed < 2**64:
        raise InvalidArgumentError("id_seed must be an int in 0..2**64-1")
    params = _lib.ChatParseParams()
    _lib.init_params(params)
    keep = []
    if family is not None:
        params.family = as_c_string("family", family, 64, allow_empty=False)
        keep.append(params.family)
    if chat_template is not None:
        params.chat_template = as_c_string("chat_template", chat_template, _lib.CHAT_MAX_JSON,
                                           allow_empty=False)
        keep.append(params.chat_template)
    params.starts_in_reasoning = int(starts_in_reasoning)
    params.id_seed = id_seed
    buf = ctypes.create_string_buffer(data, len(data)) if data else None
    status = _lib.new_status()
    raw = ctypes.c_void_p()
    code = _lib.lib.ferrox_chat_parse(model_pointer, ctypes.byref(params), buf, len(data),
                                      ctypes.byref(raw), status)
    check(code, status, "chat parse")
    try:
        n = ctypes.c_size_t()
        content = ctypes.string_at(_lib.lib.ferrox_chat_parsed_content(raw, ctypes.byref(n)),
                                   n.value)
        reasoning = ctypes.string_at(_lib.lib.ferrox_chat_parsed_reasoning(raw, ctypes.byref(n)),
                                     n.value)
        calls = []
        for i in range(_lib.lib.ferrox_chat_parsed_n_tool_calls(raw)):
            c = _lib.lib.ferrox_chat_parsed_tool_call(raw, i).contents
            calls.append({"id": c.id.decode(), "name": c.name.decode("utf-8", errors="replace"),
                          "arguments": ctypes.string_at(c.arguments, c.arguments_len).decode(
                              "utf-8", errors="replace")})
        family_name = (_lib.lib.ferrox_chat_parsed_family(raw) or b"").decode()
    finally:
        _lib.lib.ferrox_chat_parsed_free(raw)
    return ParsedAnswer(family_name, content.decode("utf-8", errors="replace"),
                        reasoning.decode("utf-8", errors="replace"), calls)
