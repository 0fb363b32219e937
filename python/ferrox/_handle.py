"""A C handle shared between Python threads, freed exactly once.

Each C call runs inside `use()`, which counts it; `close()` refuses new calls
(ClosedError) and waits for the running ones to return before it frees the
handle, so a handle is never freed under a call on another thread (which would
crash the process instead of raising).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from .errors import ClosedError


class Handle:
    def __init__(self, pointer: Optional[int], free: Callable[[int], None], what: str):
        self._pointer: Optional[int] = pointer
        self._free = free
        self._what = what
        self._changed = threading.Condition(threading.Lock())
        self._active = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def use(self) -> Iterator[int]:
        """The raw pointer for the length of one or more C calls."""
        with self._changed:
            if self._closed:
                raise ClosedError(f"the {self._what} is closed; it can no longer be used")
            self._active += 1
        try:
            yield self._pointer  # type: ignore[misc]
        finally:
            with self._changed:
                self._active -= 1
                if self._active == 0:
                    self._changed.notify_all()

    def close(self, before_free: Optional[Callable[[], None]] = None) -> None:
        """Refuses new calls, waits for running ones, runs before_free, frees once."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            while self._active:
                self._changed.wait()
            pointer, self._pointer = self._pointer, None
        if before_free is not None:
            before_free()
        if pointer:
            self._free(pointer)
