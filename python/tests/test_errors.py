"""Errors: each C status as its exception with code and message, the path in
load errors, arguments refused before C, and closed handles refusing use."""
from __future__ import annotations

import threading

import pytest

import ferrox
from ferrox import _lib


def test_a_missing_file_is_an_io_error_naming_the_path(tmp_path):
    path = tmp_path / "no such model.gguf"
    with pytest.raises(ferrox.FerroxIOError) as e:
        ferrox.Model(path)
    assert e.value.code == _lib.IO == 3 and e.value.code_name == "i/o error"
    assert str(path) in e.value.message and str(path) in str(e.value)


def test_a_file_that_is_not_gguf_is_refused_naming_the_path(tmp_path, rng):
    path = tmp_path / "noise.gguf"
    path.write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    with pytest.raises(ferrox.FerroxError) as e:
        ferrox.Model(path)
    assert e.value.code in (_lib.IO, _lib.INVALID_ARGUMENT)
    assert str(path) in e.value.message


def test_a_progress_callback_cancels_the_load(tiny_llama_path):
    seen = []
    with pytest.raises(ferrox.CancelledError) as e:
        ferrox.Model(tiny_llama_path, progress=lambda f: seen.append(f) or True)
    assert e.value.code == _lib.CANCELLED and seen and 0 <= seen[0] <= 1

    class Boom(Exception):
        pass

    def boom(_fraction):
        raise Boom("from the callback")

    with pytest.raises(Boom):
        ferrox.Model(tiny_llama_path, progress=boom)


def test_an_unknown_backend_is_a_backend_error_naming_it(tiny_llama_path):
    with pytest.raises(ferrox.FerroxError) as e:
        ferrox.Model(tiny_llama_path, backend=["nosuchbackend"])
    assert e.value.code in (_lib.BACKEND, _lib.INVALID_ARGUMENT)
    assert "nosuchbackend" in e.value.message


def test_a_template_that_fails_names_its_line(tiny_llama):
    source = "{{ 'ok' }}\n{{ raise_exception('refused here') }}"
    with pytest.raises(ferrox.InvalidArgumentError) as e:
        tiny_llama.apply_chat_template([{"role": "user", "content": "x"}], chat_template=source)
    assert e.value.code == _lib.INVALID_ARGUMENT and "refused here" in e.value.message
    assert ":2" in e.value.message
    with pytest.raises(ferrox.InvalidArgumentError, match="nosuch"):
        tiny_llama.apply_chat_template([{"role": "user", "content": "x"}], template_name="nosuch")


def test_no_room_carries_the_cells(tiny_llama, rng):
    ids = [rng.randrange(3, tiny_llama.n_vocab) for _ in range(24)]
    with tiny_llama.context(n_ctx=32, n_batch=32) as ctx:
        ctx.eval(ids[:20])
        with pytest.raises(ferrox.NoRoomError) as e:
            ctx.eval(ids[:16])
        assert e.value.code == _lib.NO_ROOM
        assert (e.value.cells_needed, e.value.cells_free) == (16, 12)
        assert ctx.kv_usage() == (20, 32)  # a failed decode changes nothing
        ctx.eval(ids[:12])


BAD_GENERATE = [
    (dict(temperature=-0.5), ferrox.InvalidArgumentError, r"temperature is -0.5"),
    (dict(temperature=float("nan")), ferrox.InvalidArgumentError, "temperature is nan"),
    (dict(top_p=1.5), ferrox.InvalidArgumentError, r"top_p is 1.5; it must be in \[0.0, 1.0\]"),
    (dict(min_p=-0.1), ferrox.InvalidArgumentError, "min_p"),
    (dict(repeat_penalty=0), ferrox.InvalidArgumentError, r"repeat_penalty is 0.0; .*\(0.0"),
    (dict(top_k=-1), ferrox.InvalidArgumentError, "top_k is -1"),
    (dict(top_k=1 << 32), ferrox.InvalidArgumentError, "top_k is 4294967296"),
    (dict(top_k=2.5), TypeError, "top_k must be an int"),
    (dict(seed=1 << 64), ferrox.InvalidArgumentError, "seed is 18446744073709551616"),
    (dict(seed=True), TypeError, "seed must be an int"),
    (dict(max_tokens=-1), ferrox.InvalidArgumentError, "max_tokens is -1"),
    (dict(stop=["x"] * 65), ferrox.InvalidArgumentError, "stop has 65 entries; at most 64"),
    (dict(stop="y" * 1025), ferrox.InvalidArgumentError, r"stop\[0\] is 1025 bytes; at most 1024"),
    (dict(stop=5), TypeError, "stop must be a str or a list"),
    (dict(logit_bias={10 ** 9: 1.0}), ferrox.InvalidArgumentError, "logit_bias key"),
    (dict(logit_bias={1: float("inf")}), ferrox.InvalidArgumentError, r"logit_bias\[1\]"),
    (dict(logit_bias=[1]), TypeError, "logit_bias must be a mapping"),
    (dict(stream="yes"), TypeError, "stream must be a bool"),
]


@pytest.mark.parametrize("kwargs, error, message", BAD_GENERATE)
def test_bad_generate_arguments_are_refused_before_c(tiny_llama, kwargs, error, message):
    with pytest.raises(error, match=message):
        tiny_llama.generate("hello", **kwargs)


def test_bad_load_arguments_are_refused_before_c(tiny_llama_path):
    cases = [
        (dict(n_threads=5000), ferrox.InvalidArgumentError, r"n_threads is 5000; .*\[0, 1024\]"),
        (dict(n_ctx=-1), ferrox.InvalidArgumentError, "n_ctx is -1"),
        (dict(n_seq_max=65), ferrox.InvalidArgumentError, "n_seq_max is 65"),
        (dict(kv_type="q8"), ferrox.InvalidArgumentError, "kv_type is 'q8'"),
        (dict(kv_type_v="q5"), ferrox.InvalidArgumentError, "kv_type_v is 'q5'"),
        (dict(backend="Bad-Name"), ferrox.InvalidArgumentError, "backend name"),
        (dict(backend=[]), ferrox.InvalidArgumentError, "1 to 16 backends"),
        (dict(plugin_dirs=["relative/dir"]), ferrox.InvalidArgumentError, "relative"),
        (dict(plugin_dirs="/abs"), TypeError, "list of folders"),
        (dict(n_threads="2"), TypeError, "n_threads must be an int"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            ferrox.Model(tiny_llama_path, **kwargs)
    # A NUL would end the C string early: some other, shorter path would be opened.
    with pytest.raises(ferrox.InvalidArgumentError, match="NUL byte at offset 3"):
        ferrox.Model("abc\0" + str(tiny_llama_path))
    with pytest.raises(TypeError):
        ferrox.Model(42)


def test_bad_chat_messages_are_refused_by_index(tiny_llama):
    chat = tiny_llama.apply_chat_template
    with pytest.raises(TypeError, match="messages must be a list"):
        chat("hello")
    with pytest.raises(TypeError, match=r"messages\[1\] must be a dict"):
        chat([{"role": "user", "content": "a"}, "b"])
    with pytest.raises(TypeError, match=r"messages\[0\]\['role'\] must be a str"):
        chat([{"content": "a"}])
    with pytest.raises(ferrox.InvalidArgumentError, match=r"messages\[0\]\['role'\] holds a NUL"):
        chat([{"role": "us\0er", "content": "a"}])
    with pytest.raises(ferrox.InvalidArgumentError, match=r"messages\[0\]\['role'\] is 65 bytes"):
        chat([{"role": "r" * 65, "content": "a"}])
    with pytest.raises(ferrox.InvalidArgumentError, match="messages has 65537 entries"):
        chat([{"role": "user", "content": ""}] * 65537)
    with pytest.raises(ferrox.InvalidArgumentError, match="chat_template or template_name"):
        chat([{"role": "user", "content": "a"}], chat_template="x", template_name="chatml")


def test_a_closed_model_raises_instead_of_crashing(tiny_llama_path):
    model = ferrox.Model(tiny_llama_path, n_ctx=64)
    ctx = model.context()
    stream = model.generate("hello there", max_tokens=20, temperature=0, stream=True,
                            logit_bias={model.eos_token: float("-inf")})
    next(stream)
    model.close()
    for use in (lambda: model.tokenize("a"), lambda: model.generate("a"),
                lambda: model.detokenize([1]), lambda: model.capacity,
                lambda: model.kernel_report(), lambda: ctx.eval([1]), lambda: ctx.kv_usage(),
                lambda: next(stream), lambda: model.context()):
        with pytest.raises(ferrox.ClosedError, match="is closed") as e:
            use()
        assert e.value.code == _lib.INVALID_ARGUMENT
    model.close()  # twice is fine
    assert model.closed and ctx.closed


def test_close_waits_for_a_call_running_on_another_thread(tiny_llama_path):
    model = ferrox.Model(tiny_llama_path, n_ctx=256)
    started = threading.Event()
    result = {}

    def generate():
        started.set()
        try:
            result["completion"] = model.generate("a b c", max_tokens=200, temperature=0)
        except ferrox.ClosedError as e:
            result["closed"] = e

    worker = threading.Thread(target=generate)
    worker.start()
    started.wait()
    model.close()  # never frees under the running decode: it ends with ClosedError or done
    worker.join()
    assert result and model.closed
