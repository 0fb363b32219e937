"""A ferrox_context: KV cells shared by up to 64 sequences, and batched generation."""
from __future__ import annotations

import array
import ctypes
import json
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _lib
from ._handle import Handle
from ._validate import UINT32_MAX, as_bool, as_int, as_path
from .errors import BusyError, InvalidArgumentError, check
from .generation import Completion, collect, run

if TYPE_CHECKING:
    from .model import Model

_INT32_MAX = (1 << 31) - 1


class Context:
    """KV cells and sequences over a model (ferrox_context).

    Args:
        model: the Model; it must stay open while the context is used (closing
            the model closes its contexts).
        n_ctx: KV cells shared by every sequence; 0: the model's n_ctx.
        n_seq: sequence ids 0..n_seq-1 (1 to 64).
        n_batch: tokens per decode; 0: the model's n_batch.
        profile: time every op of each decode (profile()).

    One thread at a time: a context used by a second thread while a call or an
    open stream holds it raises BusyError (as ferrox.h's FERROX_CODE_BUSY).
    """

    def __init__(self, model: "Model", *, n_ctx: int = 0, n_seq: int = 1, n_batch: int = 0,
                 profile: bool = False, _reuse: Optional[Handle] = None):
        as_int("n_ctx", n_ctx, 0, UINT32_MAX)
        as_int("n_seq", n_seq, 1, _lib.CONTEXT_MAX_SEQUENCES)
        as_int("n_batch", n_batch, 0, UINT32_MAX)
        as_bool("profile", profile)
        if n_batch == 0 and n_ctx:
            # The engine's rule for the model's batch (never more than the
            # context; docs/api.md) applied to this context's default.
            n_batch = min(model.n_batch, n_ctx)
        self._status = _lib.new_status()
        self._in_use = threading.Lock()
        self._logit_rows: List[int] = []
        self.model = model
        if _reuse is not None:  # a context the model kept from an earlier generate()
            self._handle = _reuse
        else:
            params = _lib.ContextParams()
            _lib.init_params(params)
            params.n_ctx, params.n_seq, params.n_batch = n_ctx, n_seq, n_batch
            params.profile = int(profile)
            raw = ctypes.c_void_p()
            with model._handle.use() as m:
                check(_lib.lib.ferrox_context_new(m, ctypes.byref(params), ctypes.byref(raw),
                                                  self._status), self._status, "context")
                self._handle = Handle(raw.value, _lib.lib.ferrox_context_free, "context")
        model._adopt(self)
        self.n_seq = n_seq
        # ferrox.h: 0 means the model's (there is no getter for a context's).
        self.n_batch = n_batch or model.n_batch
        self.n_ctx = self.kv_usage()[1]

    # ---- lifetime -------------------------------------------------------------

    def close(self) -> None:
        """Frees the context (after any call running on another thread returns)."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    def _detach(self) -> Handle:
        """Hands the C context over (to the model's pool); this object is closed."""
        handle = self._handle
        self._handle = Handle(0, lambda _p: None, "context")
        self._handle.close()
        return handle

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        # Python-side state (positions, a stream between yields) is one
        # thread's at a time, like the C context itself: refused, not waited on.
        if not self._in_use.acquire(blocking=False):
            raise BusyError("the context is in use by another thread or an open stream")
        try:
            yield
        finally:
            self._in_use.release()

    # ---- raw decoding (the generation loop's) ----------------------------------

    def _decode_rows(self, c: int, n: int, tokens: Any, positions: Any, seq_ids: Any,
                     want: Any) -> None:
        batch = _lib.Batch()
        batch.struct_size = ctypes.sizeof(_lib.Batch)
        batch.n_tokens = n
        batch.tokens = ctypes.cast(tokens, ctypes.POINTER(ctypes.c_int32))
        batch.positions = ctypes.cast(positions, ctypes.POINTER(ctypes.c_int32))
        batch.seq_ids = ctypes.cast(seq_ids, ctypes.POINTER(ctypes.c_int32))
        batch.logits = ctypes.cast(want, ctypes.POINTER(ctypes.c_uint8)) if want is not None else None
        check(_lib.lib.ferrox_decode(c, ctypes.byref(batch), self._status), self._status, "decode")

    def _decode_prompt(self, c: int, tokens: Sequence[int], seq: int, first_position: int = 0,
                       logits: str = "last") -> int:
        """Decodes tokens into `seq` in chunks of n_batch; returns the last chunk's last index."""
        chunk = max(1, self.n_batch)
        last_index = 0
        for start in range(0, len(tokens), chunk):
            part = tokens[start:start + chunk]
            n = len(part)
            ids = (ctypes.c_int32 * n)(*part)
            pos = (ctypes.c_int32 * n)(*range(first_position + start, first_position + start + n))
            seqs = (ctypes.c_int32 * n)(*([seq] * n))
            final = start + n == len(tokens)
            flags = [1 if logits == "all" else 0] * n
            if logits == "last" and final:
                flags[-1] = 1
            want = (ctypes.c_uint8 * n)(*flags)
            self._decode_rows(c, n, ids, pos, seqs, want)
            last_index = n - 1
        return last_index

    # ---- tokens in, logits out --------------------------------------------------

    def eval(self, tokens: Sequence[int], seq: int = 0, *, logits: str = "last") -> None:
        """Decodes `tokens` into sequence `seq`, continuing from its last position.

        logits: "last" (the last token's logits are kept), "all" (every
        token's, when they fit one batch) or "none". Read them with logits().
        """
        if logits not in ("last", "all", "none"):
            raise InvalidArgumentError(f"logits is {logits!r}; it must be 'last', 'all' or 'none'")
        as_int("seq", seq, 0, self.n_seq - 1)
        ids = self.model._check_tokens("tokens", tokens)
        if not ids:
            raise InvalidArgumentError("tokens is empty")
        if logits == "all" and len(ids) > self.n_batch:
            raise InvalidArgumentError(
                f"logits='all' keeps one batch's logits: {len(ids)} tokens exceed n_batch "
                f"{self.n_batch}"
            )
        with self._exclusive(), self._handle.use() as c:
            first = self._pos_range(c, seq)[1] + 1
            self._logit_rows = []  # a failed decode leaves none readable
            last = self._decode_prompt(c, ids, seq, first, logits)
            # The batch indexes of the last decode whose logits were kept.
            self._logit_rows = {"last": [last], "all": list(range(len(ids))), "none": []}[logits]

    def logits(self, index: int = -1) -> "array.array[float]":
        """A copy of batch token `index`'s logits from the last decode (n_vocab floats).

        `index` counts the tokens of the last eval() whose logits were kept:
        after eval(logits="last") the only one is 0 (or -1); after "all",
        token i of that eval is i.
        """
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError("index must be an int")
        rows = self._logit_rows
        if not rows:
            raise InvalidArgumentError("no logits kept: call eval() (logits 'last' or 'all') first")
        if index < 0:
            index += len(rows)
        as_int("index", index, 0, len(rows) - 1)
        out = ctypes.POINTER(ctypes.c_float)()
        n = self.model.n_vocab
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_logits(c, rows[index], ctypes.byref(out), self._status),
                  self._status, "logits")
            values = array.array("f")
            values.frombytes(ctypes.string_at(out, n * 4))
        return values

    def embed(self, inputs: Sequence[Sequence[int]], normalize: bool = True) -> List[List[float]]:
        """One pooled vector per token list, in order (ferrox_embed).

        The model must be an embedding model (Model(..., embedding=True));
        the context's sequences share each decode, one input each, and its
        cells are left empty. normalize: each vector scaled to L2 norm 1.
        An input's vector does not depend on the others given with it.
        """
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError("inputs must be a list of token lists")
        as_bool("normalize", normalize)
        lists = [self.model._check_tokens(f"inputs[{i}]", t) for i, t in enumerate(inputs)]
        for i, ids in enumerate(lists):
            if not ids:
                raise InvalidArgumentError(f"inputs[{i}] is empty")
        n, width = len(lists), self.model.n_embd
        if n == 0:
            return []
        arrays = [(ctypes.c_int32 * len(ids))(*ids) for ids in lists]
        pointers = (ctypes.POINTER(ctypes.c_int32) * n)(
            *[ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) for a in arrays])
        lengths = (ctypes.c_size_t * n)(*[len(ids) for ids in lists])
        out = (ctypes.c_float * (n * width))()
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_embed(c, n, pointers, lengths, int(normalize), out, n * width,
                                        self._status), self._status, "embed")
        return [list(out[i * width:(i + 1) * width]) for i in range(n)]

    # ---- sequences ------------------------------------------------------------

    def _pos_range(self, c: int, seq: int) -> Tuple[int, int]:
        lo, hi = ctypes.c_int32(), ctypes.c_int32()
        check(_lib.lib.ferrox_seq_pos_range(c, seq, ctypes.byref(lo), ctypes.byref(hi),
                                            self._status), self._status, "seq_pos_range")
        return lo.value, hi.value

    def pos_range(self, seq: int = 0) -> Tuple[int, int]:
        """(first, last) position of `seq` in the cache; (-1, -1) when empty."""
        as_int("seq", seq, 0, self.n_seq - 1)
        with self._exclusive(), self._handle.use() as c:
            return self._pos_range(c, seq)

    def kv_usage(self) -> Tuple[int, int]:
        """(cells in use, cells in all); shared cells count once."""
        used, total = ctypes.c_uint32(), ctypes.c_uint32()
        with self._handle.use() as c:
            check(_lib.lib.ferrox_kv_usage(c, ctypes.byref(used), ctypes.byref(total),
                                           self._status), self._status, "kv_usage")
        return used.value, total.value

    def remove(self, seq: int, p0: int = 0, p1: int = -1) -> None:
        """Drops positions [p0, p1) of `seq` (p1 -1: to the end; seq -1: every sequence)."""
        as_int("seq", seq, -1, self.n_seq - 1)
        as_int("p0", p0, 0, _INT32_MAX)
        as_int("p1", p1, -1, _INT32_MAX)
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_seq_remove(c, seq, p0, p1, self._status), self._status,
                  "seq_remove")

    def copy(self, src: int, dst: int, p0: int = 0, p1: int = -1) -> None:
        """`dst` shares `src`'s cells of [p0, p1) (no K/V is copied)."""
        as_int("src", src, 0, self.n_seq - 1)
        as_int("dst", dst, 0, self.n_seq - 1)
        as_int("p0", p0, 0, _INT32_MAX)
        as_int("p1", p1, -1, _INT32_MAX)
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_seq_copy(c, src, dst, p0, p1, self._status), self._status,
                  "seq_copy")

    def keep(self, seq: int) -> None:
        """Drops every sequence but `seq`."""
        as_int("seq", seq, 0, self.n_seq - 1)
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_seq_keep(c, seq, self._status), self._status, "seq_keep")

    def clear(self) -> None:
        """Empties every cell."""
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_kv_clear(c, self._status), self._status, "kv_clear")

    # ---- per-sequence state -----------------------------------------------------

    def save_state(self, seq: int = 0) -> bytes:
        """`seq`'s cached positions and K/V rows (for this model and KV kind only)."""
        as_int("seq", seq, 0, self.n_seq - 1)
        needed = ctypes.c_size_t()
        with self._exclusive(), self._handle.use() as c:
            code = _lib.lib.ferrox_seq_state_save(c, seq, None, 0, ctypes.byref(needed),
                                                  self._status)
            if code not in (_lib.OK, _lib.BUFFER_TOO_SMALL):
                check(code, self._status, "seq_state_save")
            buf = ctypes.create_string_buffer(max(1, needed.value))
            check(_lib.lib.ferrox_seq_state_save(c, seq, buf, len(buf), ctypes.byref(needed),
                                                 self._status), self._status, "seq_state_save")
            return buf.raw[: needed.value]

    def restore_state(self, seq: int, data: Union[bytes, bytearray]) -> None:
        """Replaces `seq`'s cells with saved ones (NoRoomError when too few are free)."""
        as_int("seq", seq, 0, self.n_seq - 1)
        blob = _saved_bytes(data, "save_state")
        buf = ctypes.create_string_buffer(blob, len(blob))
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_seq_state_restore(c, seq, buf, len(blob), self._status),
                  self._status, "seq_state_restore")

    def save_state_file(self, seq: int, path: Any) -> None:
        as_int("seq", seq, 0, self.n_seq - 1)
        p = as_path("path", path)
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_seq_state_save_file(c, seq, p, self._status), self._status,
                  "seq_state_save_file")

    def restore_state_file(self, seq: int, path: Any) -> None:
        as_int("seq", seq, 0, self.n_seq - 1)
        p = as_path("path", path)
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_seq_state_restore_file(c, seq, p, self._status),
                  self._status, "seq_state_restore_file")

    # ---- recurrent-state checkpoints (docs/api.md) ------------------------------

    def checkpoint(self, seq: int = 0) -> bytes:
        """`seq`'s recurrent state after its last position, for rewind(): a model with
        recurrent layers only (Model.is_recurrent), whose sequences cannot drop a tail."""
        as_int("seq", seq, 0, self.n_seq - 1)
        needed = ctypes.c_size_t()
        with self._exclusive(), self._handle.use() as c:
            buf = ctypes.create_string_buffer(max(1, _lib.lib.ferrox_checkpoint_size(c)))
            check(_lib.lib.ferrox_seq_checkpoint(c, seq, buf, len(buf), ctypes.byref(needed),
                                                 self._status), self._status, "seq_checkpoint")
            return buf.raw[: needed.value]

    def rewind(self, seq: int, data: Union[bytes, bytearray]) -> None:
        """Drops `seq`'s positions from the checkpoint's on and puts its state back, as if
        the sequence had never gone past it (it must still hold the positions before)."""
        as_int("seq", seq, 0, self.n_seq - 1)
        blob = _saved_bytes(data, "checkpoint")
        buf = ctypes.create_string_buffer(blob, len(blob))
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_seq_rewind(c, seq, buf, len(blob), self._status),
                  self._status, "seq_rewind")

    # ---- profile --------------------------------------------------------------

    def profile(self, reset: bool = False) -> Dict[str, Any]:
        """The per-op profile since creation or the last reset (a context made with profile=True)."""
        out = ctypes.c_char_p()
        with self._exclusive(), self._handle.use() as c:
            check(_lib.lib.ferrox_context_profile(c, ctypes.byref(out), self._status),
                  self._status, "profile")
            doc = json.loads(out.value or b"{}")
            if reset:
                check(_lib.lib.ferrox_context_profile_reset(c, self._status), self._status,
                      "profile reset")
        return doc

    # ---- batched generation ---------------------------------------------------

    def generate(self, prompts: Sequence[Union[str, Sequence[int]]], max_tokens: int = 128,
                 *, seed: Union[None, int, Sequence[int]] = None, stop: Any = None,
                 special: bool = False, **sampling: Any) -> List[Completion]:
        """Generates for several prompts at once, one sequence each (ids 0..n-1).

        Every step decodes one token of each live sequence in one batch; each
        sequence gets the tokens it would get alone (Model.generate with the
        same settings and seed). The context is cleared first.

        Args:
            prompts: up to n_seq prompts (text, or token ids).
            max_tokens: the budget of each sequence.
            seed: one seed for all, or one per prompt.
            stop, special, **sampling: as Model.generate.
        Returns:
            One Completion per prompt, in order.
        """
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
            raise TypeError("prompts must be a list of prompts")
        if not prompts or len(prompts) > self.n_seq:
            raise InvalidArgumentError(
                f"prompts has {len(prompts)} entries; this context holds 1 to {self.n_seq} sequences"
            )
        seeds = self.model._seeds(seed, len(prompts))
        requests = [
            self.model._request(p, max_tokens, sampling, s, stop, special, clamp=False)
            for p, s in zip(prompts, seeds)
        ]
        cells = sum(len(r.prompt) + r.max_tokens for r in requests)
        if cells > self.n_ctx:
            raise InvalidArgumentError(
                f"the prompts and max_tokens need up to {cells} KV cells; the context has "
                f"{self.n_ctx} (make it with a larger n_ctx)"
            )
        self.clear()
        self._logit_rows = []
        return collect(run(self.model, self, requests))


def _saved_bytes(data: Any, made_by: str) -> bytes:
    """`data` as bytes, as `made_by` returned them: a TypeError for another type, an
    InvalidArgumentError when empty."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes (what {made_by} returned), not {type(data).__name__}")
    blob = bytes(data)
    if not blob:
        raise InvalidArgumentError("data is empty")
    return blob
