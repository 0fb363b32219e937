"""The sampler chain's settings, checked, and one ferrox_sampler per sequence.

A setting left as None keeps ferrox_sampler_params_default's value, which is
`ferrox run`'s default too (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
repeat_penalty 1, repeat_last_n 64, frequency/presence 0, seed 0): the engine
holds the defaults, the binding does not repeat them.
"""
from __future__ import annotations

import ctypes
import json
import math
from dataclasses import dataclass, fields
from typing import Any, Dict, Mapping, Optional, Union

from . import _lib
from ._validate import UINT32_MAX, UINT64_MAX, as_float, as_int, as_text
from .errors import InvalidArgumentError, InvalidGrammarError, check

# Where C accepts any finite value the binding still refuses what has no
# meaning: a negative temperature (C: greedy) must be written as 0.
_REAL_RANGES = {
    "temperature": (0.0, math.inf, False),
    "top_p": (0.0, 1.0, False),
    "min_p": (0.0, 1.0, False),
    "repeat_penalty": (0.0, math.inf, True),
    "frequency_penalty": (-math.inf, math.inf, False),
    "presence_penalty": (-math.inf, math.inf, False),
}
_COUNT_RANGES = {"top_k": UINT32_MAX, "repeat_last_n": UINT32_MAX, "seed": UINT64_MAX}


@dataclass(frozen=True)
class Sampling:
    """Sampler settings; None: the engine's default. See ferrox_sampler_params."""

    temperature: Optional[float] = None
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    min_p: Optional[float] = None
    repeat_penalty: Optional[float] = None
    repeat_last_n: Optional[int] = None
    frequency_penalty: Optional[float] = None
    presence_penalty: Optional[float] = None
    seed: Optional[int] = None
    logit_bias: Optional[Mapping[int, float]] = None
    # Constrained decoding (C API 0.6): a GBNF grammar, or a JSON schema (a
    # dict, or its JSON text) the output must validate against; not both.
    grammar: Optional[str] = None
    json_schema: Union[None, str, Mapping[str, Any]] = None

    def checked(self, n_vocab: int) -> "Sampling":
        """Raises TypeError / InvalidArgumentError naming the first bad setting."""
        for name, (lo, hi, lo_open) in _REAL_RANGES.items():
            value = getattr(self, name)
            if value is not None:
                as_float(name, value, lo, hi, lo_open=lo_open)
        for name, hi in _COUNT_RANGES.items():
            value = getattr(self, name)
            if value is not None:
                as_int(name, value, 0, hi)
        if self.logit_bias is not None:
            if not isinstance(self.logit_bias, Mapping):
                raise TypeError(
                    f"logit_bias must be a mapping of token id to bias, not "
                    f"{type(self.logit_bias).__name__}"
                )
            if len(self.logit_bias) > n_vocab:
                raise InvalidArgumentError(
                    f"logit_bias has {len(self.logit_bias)} entries; the vocabulary has {n_vocab}"
                )
            for token, bias in self.logit_bias.items():
                as_int("logit_bias key", token, 0, n_vocab - 1)
                # -inf bans the token (ferrox_logit_bias); +inf or NaN has no meaning.
                if not (isinstance(bias, (int, float)) and not isinstance(bias, bool)):
                    raise TypeError(f"logit_bias[{token}] must be a number")
                if bias != -math.inf:
                    as_float(f"logit_bias[{token}]", bias, -math.inf, math.inf)
        if self.grammar is not None and self.json_schema is not None:
            raise InvalidArgumentError("give grammar or json_schema, not both")
        if self.grammar is not None:
            if not isinstance(self.grammar, str):
                raise TypeError(f"grammar must be a str, not {type(self.grammar).__name__}")
            as_text("grammar", self.grammar, _lib.GRAMMAR_MAX_BYTES)
        if self.json_schema is not None:
            schema_text(self.json_schema)
        return self

    def with_seed(self, seed: Optional[int]) -> "Sampling":
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["seed"] = seed
        return Sampling(**values)


def schema_text(schema: Union[str, Mapping[str, Any]]) -> bytes:
    """A JSON schema as the UTF-8 text the engine reads (a dict keeps its key order)."""
    if isinstance(schema, Mapping):
        try:
            text = json.dumps(schema, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"json_schema is not JSON: {e}") from None
    elif isinstance(schema, str):
        text = schema
    else:
        raise TypeError(f"json_schema must be a dict or a str, not {type(schema).__name__}")
    return as_text("json_schema", text, _lib.JSON_SCHEMA_MAX_BYTES)


def response_format_schema(response_format: Optional[Mapping[str, Any]]) -> Optional[Any]:
    """The JSON schema an OpenAI-style response_format asks for; None for text or None."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise TypeError("response_format must be a dict")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, Mapping) or "schema" not in spec:
            raise InvalidArgumentError('response_format json_schema needs {"json_schema": {"schema": ...}}')
        return spec["schema"]
    raise InvalidArgumentError(
        f"response_format type {kind!r}: expected 'text', 'json_object' or 'json_schema'")


def default_sampling() -> Dict[str, object]:
    """The engine's defaults (ferrox_sampler_params_default) as a dict."""
    p = _lib.SamplerParams()
    _lib.init_params(p)
    names = [field[0] for field in _lib.SamplerParams._fields_]
    return {name: getattr(p, name) for name in names
            if name in _REAL_RANGES or name in _COUNT_RANGES}


class Sampler:
    """One ferrox_sampler: its own history and random stream (one sequence's),
    and its grammar's position when it has one."""

    def __init__(self, settings: Sampling, model_pointer: Optional[int] = None):
        self._raw: Optional[ctypes.c_void_p] = None  # close() is safe if new() refuses
        p = _lib.SamplerParams()
        _lib.init_params(p)
        for name in (*_REAL_RANGES, *_COUNT_RANGES):
            value = getattr(settings, name)
            if value is not None:
                setattr(p, name, value)
        bias = settings.logit_bias or {}
        self._bias = (_lib.LogitBias * max(1, len(bias)))()  # kept alive: C copies at new
        for i, (token, value) in enumerate(bias.items()):
            self._bias[i].token = token
            self._bias[i].bias = value
        p.logit_bias = self._bias if bias else None
        p.n_logit_bias = len(bias)
        text = None
        if settings.grammar is not None:
            text = as_text("grammar", settings.grammar, _lib.GRAMMAR_MAX_BYTES)
        elif settings.json_schema is not None:
            text = schema_text(settings.json_schema)
        # Kept alive while C reads it (at ferrox_sampler_new); never NULL, even empty.
        self._text = ctypes.create_string_buffer(text, len(text) + 1) if text is not None else None
        if text is not None:
            p.model = model_pointer
            address = ctypes.cast(self._text, ctypes.c_void_p).value
            if settings.grammar is not None:
                p.grammar, p.grammar_len = address, len(text)
            else:
                p.json_schema, p.json_schema_len = address, len(text)
        self.has_grammar = text is not None
        self._status = _lib.new_status()
        raw = ctypes.c_void_p()
        code = _lib.lib.ferrox_sampler_new(ctypes.byref(p), ctypes.byref(raw), self._status)
        if code == _lib.INVALID_ARGUMENT and text is not None:
            message = self._status.message.decode("utf-8", errors="replace")
            raise InvalidGrammarError(message, code)
        check(code, self._status, "sampler")
        self._raw = raw
        self._token = ctypes.c_int32()

    def sample(self, logits: "ctypes._Pointer", n_vocab: int) -> int:
        code = _lib.lib.ferrox_sampler_sample(self._raw, logits, n_vocab,
                                              ctypes.byref(self._token), self._status)
        check(code, self._status, "sample")
        return self._token.value

    def accept(self, tokens: "ctypes.Array", n: int) -> None:
        """A prompt's tokens: into the history only."""
        code = _lib.lib.ferrox_sampler_accept(self._raw, tokens, n, self._status)
        check(code, self._status, "sampler accept")

    def accept_token(self, token: int) -> None:
        """A generated token: the history, and the grammar over its text."""
        code = _lib.lib.ferrox_sampler_accept_token(self._raw, token, self._status)
        check(code, self._status, "sampler accept")

    def grammar_state(self) -> int:
        """ferrox_sampler_grammar_state: _lib.GRAMMAR_NONE, _OPEN, _COMPLETE, _ENDED, _FAILED."""
        return int(_lib.lib.ferrox_sampler_grammar_state(self._raw))

    def close(self) -> None:
        raw, self._raw = self._raw, None
        if raw:
            _lib.lib.ferrox_sampler_free(raw)

    def __del__(self) -> None:
        self.close()
