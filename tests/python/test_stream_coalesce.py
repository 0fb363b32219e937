"""ferrox.serve._coalesce: a stream's chunks joined on their way through Ray
(the `stream_interval_ms` setting of docs/scale-out.md). No Ray needed: the
joiner is plain asyncio. What must hold: the same bytes in the same order,
fewer messages when chunks come fast, no chunk held back waiting for the next
one, an error delivered after the chunks before it, and the source closed
when the consumer stops early.
"""
from __future__ import annotations

import asyncio
import pathlib
import random
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from ferrox.serve._coalesce import coalesced  # noqa: E402


def sse_events(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [f'data: {{"i": {i}, "text": "{rng.random():.6f}"}}\n\n'.encode() for i in range(n)]


async def source(chunks, pause_s=0.0, fail=None, closed=None):
    try:
        for c in chunks:
            yield c
            await asyncio.sleep(pause_s)
        if fail is not None:
            raise fail
    finally:
        if closed is not None:
            closed.set()


async def collect(gen):
    return [c async for c in gen]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fast_chunks_are_joined_and_the_bytes_kept(seed):
    events = sse_events(40, seed)
    out = asyncio.run(collect(coalesced(source(events), 0.2)))
    assert b"".join(out) == b"".join(events)
    assert len(out) < len(events) // 4, len(out)  # 40 writes with no pause: a few messages


def test_zero_interval_passes_each_chunk_through():
    events = sse_events(12, 7)
    assert asyncio.run(collect(coalesced(source(events, 0.001), 0))) == events


def test_a_chunk_is_not_held_for_the_next_one():
    """The source sends its second chunk only once the consumer has the
    first: a joiner that waited for more than its interval would hang."""
    async def main():
        got_first = asyncio.Event()

        async def gated():
            yield b"data: 1\n\n"
            await asyncio.wait_for(got_first.wait(), 10)
            yield b"data: 2\n\n"

        out = []
        async for chunk in coalesced(gated(), 0.05):
            out.append(chunk)
            got_first.set()
        return out

    assert asyncio.run(main()) == [b"data: 1\n\n", b"data: 2\n\n"]


def test_an_error_comes_after_the_chunks_before_it():
    events = sse_events(5, 11)

    async def main():
        out = []
        with pytest.raises(ConnectionResetError, match="child went away"):
            async for chunk in coalesced(source(events, fail=ConnectionResetError("child went away")),
                                         0.2):
                out.append(chunk)
        return out

    assert b"".join(asyncio.run(main())) == b"".join(events)


def test_the_source_is_closed_when_the_consumer_stops():
    async def main():
        closed = asyncio.Event()
        joined = coalesced(source(sse_events(1000, 5), 0.001, closed=closed), 0.01)
        async for _ in joined:
            break
        await joined.aclose()
        return closed.is_set()

    assert asyncio.run(main())
