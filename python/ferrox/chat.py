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
from typing import Any, List, Optional, Sequence, Tuple

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
                 template_name: Optional[str], add_generation_prompt: bool):
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
        _lib.lib.ferrox_chat_params_default(ctypes.byref(self.params))
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
           add_generation_prompt: bool = True) -> ChatPrompt:
    """ferrox_chat_apply_template over checked arguments (the model's `use()` held)."""
    args = _Arguments(messages, tools, chat_template, template_name, add_generation_prompt)
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
