"""Streamed chunks joined into fewer, larger ones on their way through Ray.

Every chunk a replica yields crosses two Ray hops (replica -> ingress ->
Serve's proxy), each a Python message costing CPU time that, on a small
machine, the engines would otherwise use. Joining the chunks that arrive
within `interval_s` of the first one keeps the bytes and their order as the
child wrote them (SSE events stay whole: a join of whole writes is whole
events) and holds no chunk longer than `interval_s`. An error of the source
reaches the consumer after the chunks that came before it.
"""
from __future__ import annotations

import asyncio
from typing import AsyncIterator

_END = object()


async def coalesced(chunks: AsyncIterator[bytes], interval_s: float) -> AsyncIterator[bytes]:
    """`chunks`, those that arrive within `interval_s` of a pending one joined;
    `interval_s` <= 0 passes each chunk through as it comes."""
    if interval_s <= 0:
        async for chunk in chunks:
            yield chunk
        return
    queue: asyncio.Queue = asyncio.Queue()

    async def pump() -> None:
        try:
            async for chunk in chunks:
                await queue.put(chunk)
            await queue.put(_END)
        except Exception as e:  # noqa: BLE001  (handed on to the consumer, raised there)
            await queue.put(e)

    reader = asyncio.create_task(pump())
    loop = asyncio.get_running_loop()
    try:
        done = False
        while not done:
            item = await queue.get()
            pending: list[bytes] = []
            deadline = loop.time() + interval_s
            while True:
                if item is _END:
                    done = True
                    break
                if isinstance(item, Exception):
                    if pending:
                        yield b"".join(pending)
                    raise item
                pending.append(item)
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    item = await asyncio.wait_for(queue.get(), left)
                except asyncio.TimeoutError:
                    break
            if pending:
                yield b"".join(pending)
    finally:
        reader.cancel()
        try:
            await reader  # done with the source before its owner closes it
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass
