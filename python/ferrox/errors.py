"""Exceptions: one class per ferrox_code, each carrying the C status.

Every failed C call raises the subclass of its code, with the code, its name
(ferrox_code_name) and the engine's message. Validation done in Python before
a call raises the same classes (InvalidArgumentError for a value out of range),
or TypeError for a value of the wrong type, as Python's own functions do.
"""
from __future__ import annotations

from typing import Optional

from . import _lib


class FerroxError(Exception):
    """A failed ferrox call.

    Attributes:
        code: the C status (a ferrox_code: 1 invalid argument, 2 no room, 3 I/O,
            4 backend, 5 cancelled, 6 busy, 7 buffer too small, 8 grammar).
        code_name: ferrox_code_name(code), e.g. "invalid argument".
        message: the engine's message (or the binding's, for a check made in Python).
    """

    code: int = -1

    def __init__(self, message: str, code: Optional[int] = None):
        if code is not None:
            self.code = code
        self.message = message
        name = _lib.lib.ferrox_code_name(self.code)
        self.code_name = name.decode() if name else "unknown"
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.message} ({self.code_name})"


class InvalidArgumentError(FerroxError, ValueError):
    """FERROX_CODE_INVALID_ARGUMENT: a bad value, size, id or file content."""

    code = _lib.INVALID_ARGUMENT


class NoRoomError(FerroxError):
    """FERROX_CODE_NO_ROOM: the KV cache has too few free cells.

    Attributes:
        cells_needed, cells_free: what the decode needed and what was free.
    """

    code = _lib.NO_ROOM

    def __init__(self, message: str, code: Optional[int] = None, cells_needed: int = 0,
                 cells_free: int = 0):
        super().__init__(message, code)
        self.cells_needed = cells_needed
        self.cells_free = cells_free


class FerroxIOError(FerroxError):
    """FERROX_CODE_IO: a file could not be read or written."""

    code = _lib.IO


class BackendError(FerroxError):
    """FERROX_CODE_BACKEND: a backend (plugin) failed or none was ready."""

    code = _lib.BACKEND


class CancelledError(FerroxError):
    """FERROX_CODE_CANCELLED: the load's progress callback asked to stop."""

    code = _lib.CANCELLED


class BusyError(FerroxError):
    """FERROX_CODE_BUSY: the context is in use by another thread."""

    code = _lib.BUSY


class BufferTooSmallError(FerroxError):
    """FERROX_CODE_BUFFER_TOO_SMALL (the binding retries these; seen only on a bug)."""

    code = _lib.BUFFER_TOO_SMALL


class InvalidGrammarError(InvalidArgumentError):
    """A grammar or JSON schema the engine refused (FERROX_CODE_INVALID_ARGUMENT).

    The message names the place: "grammar:LINE:COL: ..." for GBNF, the JSON
    pointer for a schema ("json_schema: /properties/age/multipleOf: not enforced").
    """


class GrammarError(FerroxError):
    """FERROX_CODE_GRAMMAR: the grammar admits no token here (the message says why)."""

    code = _lib.GRAMMAR


class ClosedError(FerroxError):
    """A model, context or stream used after close(): refused before any C call.

    Its code is FERROX_CODE_INVALID_ARGUMENT (a freed handle is not a valid argument).
    """

    code = _lib.INVALID_ARGUMENT


_BY_CODE = {
    cls.code: cls
    for cls in (InvalidArgumentError, NoRoomError, FerroxIOError, BackendError,
                CancelledError, BusyError, BufferTooSmallError, GrammarError)
}


def error_from_status(code: int, status: "_lib.CallStatus", context: str = "") -> FerroxError:
    """The exception for a failed call's code and status (context: what was being done)."""
    message = status.message.decode("utf-8", errors="replace") or "no message"
    if context and not message.startswith(f"{context}:"):
        message = f"{context}: {message}"
    cls = _BY_CODE.get(code, FerroxError)
    if cls is NoRoomError:
        return NoRoomError(message, code, status.cells_needed, status.cells_free)
    return cls(message, code)


def check(code: int, status: "_lib.CallStatus", context: str = "") -> None:
    """Raises the exception of `code` unless it is FERROX_CODE_OK."""
    if code != _lib.OK:
        raise error_from_status(code, status, context)
