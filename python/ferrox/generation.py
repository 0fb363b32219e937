"""The generation loop over a context's sequences, as `ferrox run` draws.

Per sequence: its prompt decoded in chunks of the context's batch (only the
last token's logits), the prompt accepted into its sampler, then per step a
draw from the last logits; an end-of-generation token ends it, else the token
is accepted, its text pushed through a detok stream (whole UTF-8 characters,
stop strings held back and cut), and, unless that was the last token asked
for, decoded. Several sequences step together: one decode per step holds one
token of each live sequence (batch-invariant: each sequence gets the logits it
gets alone). This is `ferrox run`'s loop (cli/commands/run.cpp) token for
token, so the same prompt, settings and seed give the same text.
"""
from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Generator, Iterator, List, Optional, Tuple

from . import _lib
from .errors import check
from .sampling import Sampler, Sampling

if TYPE_CHECKING:
    from .context import Context
    from .model import Model


@dataclass
class Completion:
    """One sequence's result.

    text: the generated text (stop strings cut off; bytes that are not UTF-8
    shown as U+FFFD); text_bytes: the same as the engine wrote it; tokens: the generated
    token ids (an end-of-generation token excluded); finish_reason: "stop"
    (an end-of-generation token or a stop string) or "length" (max_tokens, or
    the context's end); prompt_tokens: the prompt's token count; the timings
    are measured as `ferrox run` measures them: prompt_seconds for the
    prompt's decode, generation_seconds from then to the end, over
    decode_steps forward passes; grammar_complete (with a grammar or a JSON
    schema, else None): whether the text is a whole sentence of it -- False
    when max_tokens ended it first (then the text is not valid JSON).
    """

    text: str = ""
    text_bytes: bytes = b""
    tokens: List[int] = field(default_factory=list)
    finish_reason: str = "length"
    prompt_tokens: int = 0
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0
    decode_steps: int = 0
    grammar_complete: Optional[bool] = None

    @property
    def tokens_per_second(self) -> float:
        """Decode steps per second after the prompt (`ferrox run`'s "eval" tok/s)."""
        if self.decode_steps == 0 or self.generation_seconds <= 0:
            return 0.0
        return self.decode_steps / self.generation_seconds


@dataclass
class SequenceRequest:
    """What one sequence generates: prompt ids, a budget, sampler settings, stops."""

    prompt: List[int]
    max_tokens: int
    sampling: Sampling
    stops: List[bytes]


class _DetokStream:
    def __init__(self, model_pointer: int, stops: List[bytes]):
        self._status = _lib.new_status()
        raw = ctypes.c_void_p()
        check(_lib.lib.ferrox_detok_stream_new(model_pointer, ctypes.byref(raw), self._status),
              self._status, "detok stream")
        self._raw: Optional[ctypes.c_void_p] = raw
        for stop in stops:
            buf = ctypes.create_string_buffer(stop, len(stop))
            check(_lib.lib.ferrox_detok_stream_add_stop(raw, buf, len(stop), self._status),
                  self._status, "stop string")
        self._capacity = 256
        self._buf = ctypes.create_string_buffer(self._capacity)
        self._needed = ctypes.c_size_t()

    def push(self, token: int) -> bytes:
        """The whole characters this token completes (token < 0: the end)."""
        code = _lib.lib.ferrox_detok_stream_push(self._raw, token, self._buf, self._capacity,
                                                 ctypes.byref(self._needed), self._status)
        if code == _lib.BUFFER_TOO_SMALL:  # nothing changed: push it again, larger
            self._capacity = self._needed.value + 1
            self._buf = ctypes.create_string_buffer(self._capacity)
            code = _lib.lib.ferrox_detok_stream_push(self._raw, token, self._buf,
                                                     self._capacity, ctypes.byref(self._needed),
                                                     self._status)
        check(code, self._status, "detok stream")
        return self._buf.raw[: self._needed.value]

    def stopped(self) -> bool:
        return _lib.lib.ferrox_detok_stream_stopped(self._raw) != 0

    def close(self) -> None:
        raw, self._raw = self._raw, None
        if raw:
            _lib.lib.ferrox_detok_stream_free(raw)


class _Sequence:
    """One sequence's state through the loop."""

    def __init__(self, seq_id: int, request: SequenceRequest, model_pointer: int):
        self.seq_id = seq_id
        self.request = request
        self.sampler = Sampler(request.sampling, model_pointer)
        self.detok = _DetokStream(model_pointer, request.stops)
        self.position = 0  # the next position to decode
        self.pending = -1  # the token drawn and not yet taken
        self.text = bytearray()
        self.result = Completion(prompt_tokens=len(request.prompt))
        self.done = request.max_tokens == 0

    def close(self) -> None:
        self.sampler.close()
        self.detok.close()

    def take(self, model_pointer: int) -> bytes:
        """Takes the drawn token: ends the sequence or returns its text."""
        token = self.pending
        if _lib.lib.ferrox_model_is_end_of_generation(model_pointer, token):
            self.result.finish_reason = "stop"
            self._end()
            return b""
        self.result.tokens.append(token)
        self.sampler.accept_token(token)  # the history, and the grammar over its text
        piece = self.detok.push(token)
        if self.detok.stopped():
            self.result.finish_reason = "stop"
            self._end()
        elif len(self.result.tokens) == self.request.max_tokens:
            self.result.finish_reason = "length"
            self._end()
        return piece

    def _end(self) -> None:
        self.done = True
        if self.sampler.has_grammar:
            state = self.sampler.grammar_state()
            self.result.grammar_complete = state in (_lib.GRAMMAR_COMPLETE, _lib.GRAMMAR_ENDED)


Steps = Generator[Tuple[int, str], None, List[Completion]]


def run(model: "Model", ctx: "Context", requests: List[SequenceRequest],
        on_end: Optional[Callable[[], None]] = None) -> Steps:
    """Yields (request index, text piece); returns the completions.

    Sequence ids 0..n-1 of `ctx`, which must be empty for them. The context is
    held exclusively from the first next() to the end (or close()), and C is
    only entered between yields, so closing the model or context from another
    thread while a caller holds a suspended stream makes its next step raise
    ClosedError instead of crashing.
    """
    seqs: List[_Sequence] = []
    exclusive = ctx._exclusive()
    exclusive.__enter__()
    try:
        with model._handle.use() as m:
            for i, request in enumerate(requests):
                seqs.append(_Sequence(i, request, m))
        yield from _prefill_and_step(model, ctx, seqs)
        return [s.result for s in seqs]
    finally:
        for s in seqs:
            s.close()
        exclusive.__exit__(None, None, None)
        if on_end is not None:
            on_end()


def _decode_text(data: bytes) -> str:
    # The detok stream writes whole UTF-8 characters; bytes a vocabulary holds
    # that are not UTF-8 at all are shown as U+FFFD rather than raising mid-stream.
    return data.decode("utf-8", errors="replace")


def _prefill_and_step(model: "Model", ctx: "Context", seqs: List[_Sequence]) -> Iterator[Tuple[int, str]]:
    n_vocab = model.n_vocab
    logits = ctypes.POINTER(ctypes.c_float)()
    for s in seqs:
        if s.done:
            continue
        started = time.perf_counter()
        with model._handle.use() as m, ctx._handle.use() as c:
            prompt = s.request.prompt
            last = ctx._decode_prompt(c, prompt, s.seq_id)
            check(_lib.lib.ferrox_logits(c, last, ctypes.byref(logits), ctx._status),
                  ctx._status, "logits")
            ids = (ctypes.c_int32 * len(prompt))(*prompt)
            s.sampler.accept(ids, len(prompt))
            s.pending = s.sampler.sample(logits, n_vocab)
        s.position = len(prompt)
        s.result.prompt_seconds = time.perf_counter() - started

    eval_started = time.perf_counter()
    live = [s for s in seqs if not s.done]
    n = len(seqs)
    tokens = (ctypes.c_int32 * max(1, n))()
    positions = (ctypes.c_int32 * max(1, n))()
    seq_ids = (ctypes.c_int32 * max(1, n))()
    want = (ctypes.c_uint8 * max(1, n))(*([1] * max(1, n)))
    while live:
        pieces: List[Tuple[int, bytes]] = []
        with model._handle.use() as m, ctx._handle.use() as c:
            for s in live:
                piece = s.take(m)
                if piece:
                    pieces.append((s.seq_id, piece))
            stepping = [s for s in live if not s.done]
            for row, s in enumerate(stepping):
                tokens[row] = s.result.tokens[-1]
                positions[row] = s.position
                seq_ids[row] = s.seq_id
            if stepping:
                ctx._decode_rows(c, len(stepping), tokens, positions, seq_ids, want)
                for row, s in enumerate(stepping):
                    s.position += 1
                    s.result.decode_steps += 1
                    check(_lib.lib.ferrox_logits(c, row, ctypes.byref(logits), ctx._status),
                          ctx._status, "logits")
                    s.pending = s.sampler.sample(logits, n_vocab)
            ended = [s for s in live if s.done]
            if ended:
                for s in ended:  # what the stream held back (nothing after a stop)
                    tail = s.detok.push(-1)
                    if tail:
                        pieces.append((s.seq_id, tail))
        now = time.perf_counter()
        for s in ended:
            s.result.generation_seconds = now - eval_started
        for seq_id, piece in pieces:
            seqs[seq_id].text += piece
            text = _decode_text(piece)
            if text:
                yield seq_id, text
        live = stepping
    for s in seqs:
        if not s.result.generation_seconds:
            s.result.generation_seconds = time.perf_counter() - eval_started
        s.result.text_bytes = bytes(s.text)
        s.result.text = _decode_text(s.result.text_bytes)


class TextStream(Iterator[str]):
    """The pieces of text one generation writes, as they are decoded.

    Iterate it (or use it as a context manager, which closes it). After the
    last piece, `completion` holds the whole result (finish reason, tokens,
    timings). close() ends the generation early and frees its context.
    """

    def __init__(self, steps: Steps):
        self._steps = steps
        self.completion: Optional[Completion] = None

    def __iter__(self) -> "TextStream":
        return self

    def __next__(self) -> str:
        try:
            return next(self._steps)[1]
        except StopIteration as end:
            if end.value:
                self.completion = end.value[0]
            raise

    def close(self) -> None:
        self._steps.close()

    def __enter__(self) -> "TextStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def collect(steps: Steps) -> List[Completion]:
    """Runs a generation to its end."""
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value
