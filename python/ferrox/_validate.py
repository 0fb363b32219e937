"""Argument checks made before any value reaches C.

A value of the wrong type raises TypeError; a value out of range, too long or
holding a NUL where C reads a NUL-terminated string raises InvalidArgumentError
naming the argument and the limit. (C would read a NUL as the end of the
string and silently use a shorter one; a negative or huge int would wrap.)
"""
from __future__ import annotations

import math
import os
from typing import Any, Iterable, List, Optional

from .errors import InvalidArgumentError

UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1


def _type_name(value: Any) -> str:
    return type(value).__name__


def as_int(name: str, value: Any, lo: int, hi: int) -> int:
    """An int (not a bool) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {_type_name(value)}")
    if value < lo or value > hi:
        raise InvalidArgumentError(f"{name} is {value}; it must be in [{lo}, {hi}]")
    return value


def as_float(name: str, value: Any, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """A finite real (int or float, not bool) in [lo, hi] ((lo, hi] with lo_open)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {_type_name(value)}")
    x = float(value)
    if not math.isfinite(x):
        raise InvalidArgumentError(f"{name} is {x}; it must be finite")
    if (x <= lo if lo_open else x < lo) or x > hi:
        interval = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]"
        raise InvalidArgumentError(f"{name} is {x}; it must be in {interval}")
    return x


def as_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {_type_name(value)}")
    return value


def as_text(name: str, value: Any, max_bytes: Optional[int] = None) -> bytes:
    """str (encoded as UTF-8) or bytes; at most max_bytes bytes."""
    if isinstance(value, str):
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(
                f"{name} is not valid Unicode at character {e.start} (a lone surrogate?)"
            ) from None
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        raise TypeError(f"{name} must be str or bytes, not {_type_name(value)}")
    if max_bytes is not None and len(data) > max_bytes:
        raise InvalidArgumentError(f"{name} is {len(data)} bytes; at most {max_bytes} are allowed")
    return data


def as_c_string(name: str, value: Any, max_bytes: Optional[int] = None,
                allow_empty: bool = True) -> bytes:
    """Text for a NUL-terminated C string: no NUL inside."""
    data = as_text(name, value, max_bytes)
    nul = data.find(b"\0")
    if nul >= 0:
        raise InvalidArgumentError(
            f"{name} holds a NUL byte at offset {nul}; C would read it as the end of the string"
        )
    if not allow_empty and not data:
        raise InvalidArgumentError(f"{name} is empty")
    return data


def as_path(name: str, value: Any) -> bytes:
    """A file path (str, bytes or os.PathLike) as bytes, without NUL, not empty."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} must be a path (str, bytes or os.PathLike), not {_type_name(value)}")
    data = os.fsencode(value)
    if not data:
        raise InvalidArgumentError(f"{name} is empty")
    nul = data.find(b"\0")
    if nul >= 0:
        raise InvalidArgumentError(f"{name} holds a NUL byte at offset {nul}")
    return data


def as_tokens(name: str, tokens: Any, n_vocab: int, max_len: Optional[int] = None) -> List[int]:
    """A sequence of token ids, each an int in [0, n_vocab)."""
    if isinstance(tokens, (str, bytes, bytearray)) or not isinstance(tokens, Iterable):
        raise TypeError(f"{name} must be a sequence of int token ids, not {_type_name(tokens)}")
    out = list(tokens)
    if max_len is not None and len(out) > max_len:
        raise InvalidArgumentError(f"{name} has {len(out)} tokens; at most {max_len} are allowed")
    for i, t in enumerate(out):
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError(f"{name}[{i}] must be an int, not {_type_name(t)}")
        if t < 0 or t >= n_vocab:
            raise InvalidArgumentError(
                f"{name}[{i}] is {t}; token ids are in [0, {n_vocab}) for this model"
            )
    return out


def as_str_list(name: str, value: Any, max_items: int, max_bytes: int) -> List[bytes]:
    """None, one str, or a list of str; each at most max_bytes bytes (as UTF-8)."""
    if value is None:
        return []
    items = [value] if isinstance(value, (str, bytes)) else value
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"{name} must be a str or a list of str, not {_type_name(value)}")
    if len(items) > max_items:
        raise InvalidArgumentError(f"{name} has {len(items)} entries; at most {max_items} are allowed")
    return [as_text(f"{name}[{i}]", s, max_bytes) for i, s in enumerate(items)]
