"""The GIL is released during C calls (a decode on one thread, Python running on
another), and a context is one thread's at a time."""
from __future__ import annotations

import ctypes
import threading

import ferrox
from ferrox import _lib


def test_python_runs_on_another_thread_while_a_decode_is_inside_c(tiny_llama, rng):
    # The C context flags itself busy for the length of ferrox_decode. A second
    # thread that sees FERROX_CODE_BUSY ran Python (and called C) while the
    # first was inside the decode: impossible if the call held the GIL.
    n = 256
    ids = (ctypes.c_int32 * n)(*[rng.randrange(3, tiny_llama.n_vocab) for _ in range(n)])
    pos = (ctypes.c_int32 * n)(*range(n))
    seq = (ctypes.c_int32 * n)()
    with tiny_llama.context(n_ctx=n, n_batch=n) as ctx:
        seen_busy = False
        for _attempt in range(50):
            ctx.clear()
            done = threading.Event()

            def decode():
                try:
                    for _ in range(1000):  # entered while the poller was inside: again
                        try:
                            with ctx._handle.use() as c:
                                ctx._decode_rows(c, n, ids, pos, seq, None)
                            return
                        except ferrox.BusyError:
                            continue
                finally:
                    done.set()

            worker = threading.Thread(target=decode)
            used, total = ctypes.c_uint32(), ctypes.c_uint32()
            status = _lib.new_status()
            with ctx._handle.use() as c:
                worker.start()
                while not done.is_set():
                    if _lib.lib.ferrox_kv_usage(c, ctypes.byref(used), ctypes.byref(total),
                                                status) == _lib.BUSY:
                        seen_busy = True
                        break
            worker.join()
            if seen_busy:
                break
        assert seen_busy, "no call ever overlapped a decode: the GIL was held during C"


def test_a_context_used_by_two_threads_at_once_raises_busy(tiny_llama):
    with tiny_llama.context() as ctx:
        stream_ctx = ctx._exclusive()
        stream_ctx.__enter__()
        errors = []
        t = threading.Thread(target=lambda: errors.append(_try(ctx.eval, [1, 2])))
        t.start()
        t.join()
        stream_ctx.__exit__(None, None, None)
        assert isinstance(errors[0], ferrox.BusyError) and errors[0].code == _lib.BUSY
        ctx.eval([1, 2])  # free again


def _try(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        return e
    return None


def test_threads_sharing_a_model_get_what_each_gets_alone(tiny_llama, rng):
    prompts = [f"prompt {rng.randrange(1000)} {i}" for i in range(4)]
    alone = [tiny_llama.generate(p, max_tokens=10, seed=i).tokens for i, p in enumerate(prompts)]
    results = [None] * len(prompts)

    def work(i):
        results[i] = tiny_llama.generate(prompts[i], max_tokens=10, seed=i).tokens

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == alone
