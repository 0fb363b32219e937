"""The `gguf` package's reader over a file read into memory.

GGUFReader memory-maps the file and then slices that numpy.memmap once per
array element: on a file with a 150k-token vocabulary that is ~3 million memmap
views, ~16 s per tiny model, most of it in memmap's __array_finalize__. The
same parse over a plain in-memory array is ~5x faster and reads the same
bytes, so tests that compare ferrox with the file use this.
"""
from __future__ import annotations

import pathlib
from unittest import mock

import gguf
import numpy


def _read_whole_file(path, mode="r", *args, **kwargs) -> numpy.ndarray:
    if mode not in ("r", "c"):
        raise ValueError(f"gguf_in_memory reads only; mode {mode!r} asked for")
    return numpy.fromfile(path, dtype=numpy.uint8)


def read(path: str | pathlib.Path) -> gguf.GGUFReader:
    """gguf.GGUFReader(path), its data a plain array instead of a memmap."""
    with mock.patch.object(numpy, "memmap", _read_whole_file):
        return gguf.GGUFReader(str(path))
