"""Model: a loaded GGUF file (ferrox_model), its text functions and generation."""
from __future__ import annotations

import ctypes
import json
import os
import re
import threading
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from ._handle import Handle
from ._validate import UINT32_MAX, as_bool, as_c_string, as_int, as_path, as_str_list, as_text, as_tokens
from .chat import ChatPrompt, ParsedAnswer, parse, render
from .context import Context
from .errors import InvalidArgumentError, check
from .generation import Completion, SequenceRequest, TextStream, collect, run
from .sampling import Sampler, Sampling, response_format_schema

Prompt = Union[str, bytes, Sequence[int]]
EmbeddingInput = Union[str, Sequence[str], Sequence[int], Sequence[Sequence[int]]]
Messages = Sequence[Dict[str, Any]]

# A plugin name as the loader reads it from libferrox_<name>.so.
_BACKEND_NAME = re.compile(r"[a-z0-9_]{1,64}")
_MAX_BACKENDS = 16
_POOLING = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}
# The CPU plugin's declared range for cpu.threads (docs/security.md).
_MAX_THREADS = 1024
_CAPACITY = re.compile(
    r"weights (?P<weights>[0-9.]+) MiB \+ KV cache (?P<kv_cache>[0-9.]+) MiB \+ scratch "
    r"(?P<scratch>[0-9.]+) MiB = (?P<total>[0-9.]+) MiB of (?P<available>[0-9.]+) MiB available"
)


def bundled_plugin_dirs() -> List[str]:
    """The plugin folder beside the loaded libferrox_core (the wheel's CPU plugin)."""
    folder = _lib.library_plugin_dir()
    return [str(folder)] if folder else []


class Model:
    """A GGUF model loaded by ferrox (ferrox_model_load).

    Args:
        path: the .gguf file (the first part of a split file).
        n_ctx: KV cells the load plans and a context gets by default; 0:
            n_seq_max x min(4096, training context).
        n_batch: tokens per decode; 0: 256 (never more than n_ctx).
        n_threads: CPU threads; 0: the configuration's (one per usable core).
        n_seq_max: the most sequences one context of this model will hold.
        backend: a backend name ("cpu", "cuda") or an order (["cuda", "cpu"]);
            None: the configuration's order.
        plugin_dirs: folders searched for plugins first; the folder beside
            the library (this package's CPU plugin) comes after them, then
            $FERROX_PLUGIN_PATH, the configuration's plugins.paths and the
            install folder.
        kv_type: "f32", "f16", "q8_0" or "q4_0" (the KV cache's kind: K's,
            and V's unless kv_type_v says otherwise).
        kv_type_v: V's kind when it differs from K's (llama.cpp's -ctv, e.g.
            kv_type="q8_0", kv_type_v="f16"); None: kv_type's.
        allow_resident: False keeps the forward pass in host memory.
        embedding: load an embedding model (a file whose pooling_type is mean,
            cls or last) for embed(); without it such a file is refused.
        config_path: a ferrox.yaml; None: the usual search (docs/config.md).
        progress: called with a fraction in [0, 1] while loading; return True
            to cancel (CancelledError). An exception it raises cancels the
            load and is raised again from here.

    Raises:
        FerroxIOError (the file cannot be read; the path is in the message),
        InvalidArgumentError (not a model ferrox runs, a bad argument),
        BackendError (no backend of the order is ready), CancelledError.

    A model is read-only: its methods may be called from several threads at
    once (each generate() gets its own context). close() (or leaving a
    `with` block) frees it after the calls running on other threads return;
    any later use raises ClosedError.
    """

    def __init__(self, path: Union[str, os.PathLike], *, n_ctx: int = 0, n_batch: int = 0,
                 n_threads: int = 0, n_seq_max: int = 1,
                 backend: Union[None, str, Sequence[str]] = None,
                 plugin_dirs: Optional[Sequence[Union[str, os.PathLike]]] = None,
                 kv_type: str = "f32", kv_type_v: Optional[str] = None,
                 allow_resident: bool = True, embedding: bool = False,
                 config_path: Optional[Union[str, os.PathLike]] = None,
                 progress: Optional[Callable[[float], Optional[bool]]] = None):
        self.path = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
        c_path = as_path("path", path)
        params = _lib.ModelParams()
        _lib.init_params(params)
        params.n_ctx_max = as_int("n_ctx", n_ctx, 0, UINT32_MAX)
        params.n_batch_max = as_int("n_batch", n_batch, 0, UINT32_MAX)
        params.threads = as_int("n_threads", n_threads, 0, _MAX_THREADS)
        params.max_sequences = as_int("n_seq_max", n_seq_max, 1, _lib.CONTEXT_MAX_SEQUENCES)
        kv_kinds = {"f32": _lib.KV_F32, "f16": _lib.KV_F16, "q8_0": _lib.KV_Q8_0, "q4_0": _lib.KV_Q4_0}
        for name, value in (("kv_type", kv_type), ("kv_type_v", kv_type_v)):
            if value is not None and value not in kv_kinds:
                raise InvalidArgumentError(f"{name} is {value!r}; it must be one of {', '.join(map(repr, kv_kinds))}")
        params.kv_kind = kv_kinds[kv_type]
        params.kv_value_kind = _lib.KV_SAME if kv_type_v is None else kv_kinds[kv_type_v]
        params.allow_resident = int(as_bool("allow_resident", allow_resident))
        params.embeddings = int(as_bool("embedding", embedding))
        keep: List[Any] = []  # what C reads during the load
        if config_path is not None:
            params.config_path = as_path("config_path", config_path)
            keep.append(params.config_path)
        if backend is not None:
            names = [backend] if isinstance(backend, str) else list(backend)
            if not names or len(names) > _MAX_BACKENDS:
                raise InvalidArgumentError(f"backend names 1 to {_MAX_BACKENDS} backends")
            for i, name in enumerate(names):
                if not isinstance(name, str):
                    raise TypeError(f"backend[{i}] must be a str, not {type(name).__name__}")
                if not _BACKEND_NAME.fullmatch(name):
                    raise InvalidArgumentError(
                        f"backend[{i}] is {name!r}; a backend name is 1 to 64 of a-z, 0-9, _"
                    )
            arr = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
            keep.append(arr)
            params.backends, params.n_backends = arr, len(names)
        dirs: List[bytes] = []
        if plugin_dirs is not None:
            if isinstance(plugin_dirs, (str, bytes, os.PathLike)):
                raise TypeError("plugin_dirs must be a list of folders")
            for i, d in enumerate(plugin_dirs):
                folder = as_path(f"plugin_dirs[{i}]", d)
                if not os.path.isabs(folder):
                    raise InvalidArgumentError(
                        f"plugin_dirs[{i}] is relative ({os.fsdecode(folder)!r}); plugin "
                        f"folders are absolute (the current directory is never searched)"
                    )
                dirs.append(folder)
        dirs.extend(os.fsencode(d) for d in bundled_plugin_dirs())
        if dirs:
            arr = (ctypes.c_char_p * len(dirs))(*dirs)
            keep.append(arr)
            params.plugin_dirs, params.n_plugin_dirs = arr, len(dirs)
        raised: List[BaseException] = []
        if progress is not None:
            if not callable(progress):
                raise TypeError("progress must be callable")

            def on_progress(fraction: float, _user: Any) -> int:
                try:
                    return 1 if progress(fraction) else 0
                except BaseException as e:  # noqa: BLE001 - raised again after the load
                    raised.append(e)
                    return 1

            callback = _lib.ProgressFn(on_progress)
            keep.append(callback)
            params.progress = callback
        status = _lib.new_status()
        raw = ctypes.c_void_p()
        code = _lib.lib.ferrox_model_load(c_path, ctypes.byref(params), ctypes.byref(raw), status)
        if raised:
            if raw.value:
                _lib.lib.ferrox_model_free(raw)
            raise raised[0]
        shown = os.fsdecode(c_path)
        if code != _lib.OK:
            message = status.message.decode("utf-8", errors="replace")
            # The path in every load error, whatever step refused it.
            check(code, status, "" if shown in message else shown)
        self._handle = Handle(raw.value, _lib.lib.ferrox_model_free, "model")
        self._contexts: "weakref.WeakSet[Context]" = weakref.WeakSet()
        self._contexts_lock = threading.Lock()
        # One C context kept for the next generate(): its handle, not a Context,
        # so that no reference cycle keeps the model alive after its last user.
        self._idle: List[Handle] = []
        with self._handle.use() as m:
            lib = _lib.lib
            self.n_vocab: int = lib.ferrox_model_vocab(m)
            self.n_ctx: int = lib.ferrox_model_n_ctx(m)
            self.n_batch: int = lib.ferrox_model_n_batch(m)
            self.n_ctx_train: int = lib.ferrox_model_n_ctx_train(m)
            self.n_layer: int = lib.ferrox_model_n_layer(m)
            self.n_embd: int = lib.ferrox_model_n_embd(m)
            # Recurrent layers (qwen35): a sequence cannot drop a tail.
            self.is_recurrent: bool = bool(lib.ferrox_model_is_recurrent(m))
            self.arch: str = lib.ferrox_model_arch(m).decode()
            self.bos_token: int = lib.ferrox_model_bos(m)
            self.eos_token: int = lib.ferrox_model_eos(m)
            pooling = lib.ferrox_model_pooling(m)
        self.n_seq_max: int = params.max_sequences
        # The file's pooling_type (llama.cpp's values); "none": a plain decoder.
        self.pooling: str = _POOLING.get(pooling, f"unknown ({pooling})")

    # ---- lifetime -------------------------------------------------------------

    def close(self) -> None:
        """Frees the model and its contexts; later use raises ClosedError."""

        def close_contexts() -> None:
            with self._contexts_lock:
                contexts = list(self._contexts)
                idle, self._idle = self._idle, []
            for c in contexts:
                c.close()
            for handle in idle:
                handle.close()

        self._handle.close(close_contexts)

    @property
    def closed(self) -> bool:
        return self._handle.closed

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()

    def _adopt(self, context: Context) -> None:
        with self._contexts_lock:
            self._contexts.add(context)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.arch}, {self.n_layer} layers"
        return f"<ferrox.Model {self.path!r} ({state})>"

    # ---- facts and reports ------------------------------------------------------

    def _read_text(self, call: Callable[..., int], what: str) -> str:
        status = _lib.new_status()
        needed = ctypes.c_size_t()
        capacity = 256
        while True:
            buf = ctypes.create_string_buffer(capacity)
            with self._handle.use() as m:
                code = call(m, buf, capacity, ctypes.byref(needed), status)
            if code == _lib.BUFFER_TOO_SMALL and needed.value + 1 > capacity:
                capacity = needed.value + 1  # the size may grow between two calls
                continue
            check(code, status, what)
            return buf.raw[: needed.value].decode("utf-8", errors="replace")

    def metadata(self, key: str) -> str:
        """A GGUF metadata value as text (numbers in decimal, arrays as "[n items]")."""
        if not isinstance(key, str):
            raise TypeError("key must be a str")
        k = as_c_string("key", key, 4096, allow_empty=False)
        return self._read_text(lambda m, b, c, n, s: _lib.lib.ferrox_model_meta(m, k, b, c, n, s),
                               f"metadata {key!r}")

    @property
    def chat_template(self) -> Optional[str]:
        """The file's tokenizer.chat_template, or None."""
        out = ctypes.c_char_p()
        status = _lib.new_status()
        with self._handle.use() as m:
            check(_lib.lib.ferrox_model_chat_template(m, ctypes.byref(out), status), status,
                  "chat template")
            return out.value.decode("utf-8", errors="replace") if out.value is not None else None

    @property
    def capacity(self) -> Dict[str, Any]:
        """The load-time memory plan: weights, KV cache, scratch, total and available (MiB).

        Parsed from ferrox_model_capacity_summary's line, which is kept as "summary".
        """
        out = ctypes.c_char_p()
        status = _lib.new_status()
        with self._handle.use() as m:
            check(_lib.lib.ferrox_model_capacity_summary(m, ctypes.byref(out), status), status,
                  "capacity")
            line = (out.value or b"").decode()
        plan: Dict[str, Any] = {"summary": line}
        match = _CAPACITY.fullmatch(line)
        if match is None:
            raise InvalidArgumentError(f"the capacity line does not read as a plan: {line!r}")
        plan.update({f"{k}_mib": float(v) for k, v in match.groupdict().items()})
        return plan

    @property
    def residency(self) -> Dict[str, Any]:
        """Where the forward pass runs: {"resident", "backend", "reason"}."""
        r = _lib.Residency()
        r.struct_size = ctypes.sizeof(_lib.Residency)
        status = _lib.new_status()
        with self._handle.use() as m:
            check(_lib.lib.ferrox_model_residency(m, ctypes.byref(r), status), status,
                  "residency")
            return {"resident": bool(r.resident),
                    "backend": (r.backend or b"").decode(),
                    "reason": (r.reason or b"").decode()}

    def kernel_calls(self) -> Tuple[int, int]:
        """(kernel calls, of which through a fallback) since load."""
        calls, fallback = ctypes.c_uint64(), ctypes.c_uint64()
        status = _lib.new_status()
        with self._handle.use() as m:
            check(_lib.lib.ferrox_model_kernel_calls(m, ctypes.byref(calls),
                                                     ctypes.byref(fallback), status),
                  status, "kernel calls")
        return calls.value, fallback.value

    def kernel_report(self) -> Dict[str, Any]:
        """Every kernel dispatch record since load (docs/api.md, "Kernel report")."""
        return json.loads(self._read_text(_lib.lib.ferrox_model_kernel_report, "kernel report"))

    # ---- text -----------------------------------------------------------------

    def _check_tokens(self, name: str, tokens: Any) -> List[int]:
        return as_tokens(name, tokens, self.n_vocab)

    def tokenize(self, text: Union[str, bytes, bytearray], add_special: bool = True,
                 special: bool = False) -> List[int]:
        """Token ids of `text`.

        add_special: BOS/EOS as the model's metadata says. special: control
        tokens written in the text ("<start_of_turn>") become those tokens;
        by default such text stays text.
        """
        data = as_text("text", text)
        as_bool("add_special", add_special)
        as_bool("special", special)
        status = _lib.new_status()
        n = ctypes.c_size_t()
        capacity = len(data) + 2  # a first guess; asked again when short
        buf = ctypes.create_string_buffer(data, max(1, len(data)))
        while True:
            ids = (ctypes.c_int32 * max(1, capacity))()
            with self._handle.use() as m:
                code = _lib.lib.ferrox_tokenize(m, buf, len(data), int(add_special),
                                                int(special), ids, capacity, ctypes.byref(n),
                                                status)
            if code == _lib.BUFFER_TOO_SMALL and n.value > capacity:
                capacity = n.value
                continue
            check(code, status, "tokenize")
            return ids[: n.value]

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of `tokens` (control tokens give nothing), as UTF-8 text.

        Bytes that are not UTF-8 (a character cut by the token list's end)
        become U+FFFD; detokenize_bytes() gives the bytes.
        """
        return self.detokenize_bytes(tokens).decode("utf-8", errors="replace")

    def detokenize_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of `tokens`' text."""
        ids_list = self._check_tokens("tokens", tokens)
        ids = (ctypes.c_int32 * max(1, len(ids_list)))(*ids_list)
        count = len(ids_list)
        status = _lib.new_status()
        needed = ctypes.c_size_t()
        capacity = max(64, 16 * count)
        while True:
            buf = ctypes.create_string_buffer(capacity)
            with self._handle.use() as m:
                code = _lib.lib.ferrox_detokenize(m, ids, count, buf, capacity,
                                                  ctypes.byref(needed), status)
            if code == _lib.BUFFER_TOO_SMALL and needed.value + 1 > capacity:
                capacity = needed.value + 1
                continue
            check(code, status, "detokenize")
            return buf.raw[: needed.value]

    def token_text(self, token: int) -> str:
        """The vocabulary's own text of a token ("<bos>", "▁the"), as stored."""
        t = as_int("token", token, 0, self.n_vocab - 1)
        return self._read_text(
            lambda m, b, c, n, s: _lib.lib.ferrox_token_text(m, t, b, c, n, s), "token text")

    def is_end_of_generation(self, token: int) -> bool:
        """True for EOS, EOT and the end-of-turn control tokens."""
        t = as_int("token", token, 0, self.n_vocab - 1)
        with self._handle.use() as m:
            return _lib.lib.ferrox_model_is_end_of_generation(m, t) != 0

    # ---- chat -----------------------------------------------------------------

    def apply_chat_template(self, messages: Messages, *, tools: Optional[List[Any]] = None,
                            chat_template: Optional[str] = None,
                            template_name: Optional[str] = None,
                            add_generation_prompt: bool = True,
                            template_kwargs: Optional[Dict[str, Any]] = None) -> ChatPrompt:
        """Renders a conversation as the server and `ferrox run --chat` do.

        messages: OpenAI-shaped dicts ({"role": "user", "content": "..."};
        also "name", "tool_calls", "tool_call_id", content parts). tools: the
        OpenAI tools array. chat_template: a Jinja source instead of the
        model's; template_name: a built-in ("chatml", "llama3", "gemma").
        template_kwargs: extra template variables ({"enable_thinking": False}).
        """
        with self._handle.use() as m:
            return render(m, messages, tools, chat_template, template_name,
                          add_generation_prompt, template_kwargs)

    def parse_answer(self, text: str, *, family: Optional[str] = None,
                     chat_template: Optional[str] = None, starts_in_reasoning: bool = False,
                     id_seed: int = 0) -> ParsedAnswer:
        """Splits a finished answer into content, reasoning and tool calls as the
        family of this model's template writes them (or `family` by name, or the
        family of `chat_template`); see docs/structured-output.md."""
        with self._handle.use() as m:
            return parse(m, text, family, chat_template, starts_in_reasoning, id_seed)

    # ---- generation -------------------------------------------------------------

    def _seeds(self, seed: Union[None, int, Sequence[int]], n: int) -> List[Optional[int]]:
        if seed is None or isinstance(seed, int):
            return [seed] * n
        seeds: List[Optional[int]] = list(seed)
        if len(seeds) != n:
            raise InvalidArgumentError(f"seed has {len(seeds)} entries for {n} prompts")
        return seeds

    def _request(self, prompt: Prompt, max_tokens: Optional[int], sampling: Dict[str, Any],
                 seed: Optional[int], stop: Any, special: bool, clamp: bool,
                 n_ctx: Optional[int] = None) -> SequenceRequest:
        unknown = set(sampling) - set(Sampling.__dataclass_fields__) - {"seed"}
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
        settings = Sampling(**sampling).with_seed(seed).checked(self.n_vocab)
        if settings.grammar is not None or settings.json_schema is not None:
            # Compiled once here, so that a refused grammar raises at the call
            # (not at a stream's first step); the trie it builds is the model's.
            with self._handle.use() as m:
                Sampler(settings, m).close()
        stops = as_str_list("stop", stop, _lib.DETOK_MAX_STOPS, _lib.DETOK_MAX_STOP_BYTES)
        as_bool("special", special)
        if isinstance(prompt, (str, bytes, bytearray)):
            tokens = self.tokenize(prompt, add_special=True, special=special)
        else:
            tokens = self._check_tokens("prompt", prompt)
        if not tokens:
            raise InvalidArgumentError("the prompt encodes to no tokens")
        cells = self.n_ctx if n_ctx is None else n_ctx
        if len(tokens) > cells:
            raise InvalidArgumentError(
                f"the prompt ({len(tokens)} tokens) does not fit the context ({cells} cells); "
                f"load the model with a larger n_ctx"
            )
        if max_tokens is None:
            budget = cells - len(tokens)
        else:
            budget = as_int("max_tokens", max_tokens, 0, UINT32_MAX)
            if clamp:  # as `ferrox run -n`: no further than the context's end
                budget = min(budget, cells - len(tokens))
        return SequenceRequest(tokens, budget, settings, stops)

    def _borrow_context(self) -> Context:
        # Inside the model's use(): a close() on another thread waits until the
        # context is adopted, and then closes it with the others.
        with self._handle.use():
            with self._contexts_lock:
                idle = self._idle.pop() if self._idle else None
            try:
                return Context(self, _reuse=idle)
            except BaseException:
                if idle is not None:
                    idle.close()
                raise

    def _give_back(self, ctx: Context) -> None:
        if ctx.closed or self.closed:
            return
        try:
            ctx.clear()
        except Exception:  # noqa: BLE001 - a context that cannot be cleared is dropped
            ctx.close()
            return
        with self._contexts_lock:
            if not self._idle and not self.closed:
                self._idle.append(ctx._detach())
                return
        ctx.close()

    def generate(self, prompt: Prompt, max_tokens: Optional[int] = 128, *,
                 temperature: Optional[float] = None, top_p: Optional[float] = None,
                 top_k: Optional[int] = None, min_p: Optional[float] = None,
                 repeat_penalty: Optional[float] = None, repeat_last_n: Optional[int] = None,
                 frequency_penalty: Optional[float] = None,
                 presence_penalty: Optional[float] = None, seed: Optional[int] = None,
                 logit_bias: Optional[Dict[int, float]] = None,
                 grammar: Optional[str] = None,
                 json_schema: Union[None, str, Mapping[str, Any]] = None,
                 stop: Union[None, str, Sequence[str]] = None, special: bool = False,
                 stream: bool = False) -> Union[Completion, TextStream]:
        """Generates text after `prompt`, as `ferrox run` does.

        Args:
            prompt: text (BOS added as the model says; control-token text stays
                text unless special=True) or token ids.
            max_tokens: the most tokens generated (cut at the context's end);
                None: to the context's end.
            temperature, top_p, top_k, min_p, repeat_penalty, repeat_last_n,
            frequency_penalty, presence_penalty, seed, logit_bias: the sampler
                chain (ferrox_sampler_params); None keeps the engine's default,
                which is `ferrox run`'s (temperature 0.8, top_k 40, top_p 0.95,
                min_p 0.05, seed 0). temperature 0: greedy.
            grammar: a GBNF grammar (llama.cpp's format) the text must match;
                json_schema: a JSON schema (a dict, or its JSON text) the text
                must validate against; not both. Only tokens that can continue
                it are drawn, and the text ends where it is complete
                (Completion.grammar_complete is False when max_tokens came
                first). A grammar the engine refuses raises InvalidGrammarError
                naming the line:column or the JSON pointer.
            stop: a string or up to 64 strings (1024 bytes each): the text ends
                where the first of them begins.
            stream: False returns a Completion; True returns a TextStream that
                yields the text in pieces as it is decoded.

        The same prompt, settings and seed give the same text as
        `ferrox run -p PROMPT -n MAX_TOKENS --seed SEED`.
        """
        if not isinstance(stream, bool):
            raise TypeError("stream must be a bool")
        sampling = dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                        repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                        frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                        logit_bias=logit_bias, grammar=grammar, json_schema=json_schema)
        request = self._request(prompt, max_tokens, sampling, seed, stop, special, clamp=True)
        return self._start(request, stream)

    def _start(self, request: SequenceRequest, stream: bool) -> Union[Completion, TextStream]:
        ctx = self._borrow_context()
        steps = run(self, ctx, [request], on_end=lambda: self._give_back(ctx))
        if stream:
            return TextStream(steps)
        return collect(steps)[0]

    def chat(self, messages: Messages, max_tokens: Optional[int] = 128, *,
             tools: Optional[List[Any]] = None, chat_template: Optional[str] = None,
             template_name: Optional[str] = None, stream: bool = False,
             seed: Optional[int] = None, stop: Union[None, str, Sequence[str]] = None,
             template_kwargs: Optional[Dict[str, Any]] = None,
             response_format: Optional[Mapping[str, Any]] = None,
             **sampling: Any) -> Union[Completion, TextStream]:
        """Generates the assistant's reply to `messages` (apply_chat_template, then generate).

        The prompt is rendered by the engine's chat renderer (the server's and
        `ferrox run --chat`'s); the other arguments are generate()'s (grammar=
        and json_schema= included). response_format, as OpenAI's:
        {"type": "json_schema", "json_schema": {"schema": {...}}} is
        json_schema=; {"type": "json_object"} any JSON object; {"type": "text"}
        nothing.
        """
        if not isinstance(stream, bool):
            raise TypeError("stream must be a bool")
        schema = response_format_schema(response_format)
        if schema is not None:
            if sampling.get("json_schema") is not None or sampling.get("grammar") is not None:
                raise InvalidArgumentError("give response_format, grammar or json_schema, not two")
            sampling["json_schema"] = schema
        prompt = self.apply_chat_template(messages, tools=tools, chat_template=chat_template,
                                          template_name=template_name,
                                          template_kwargs=template_kwargs)
        request = self._request(prompt.tokens, max_tokens, sampling, seed, stop, False,
                                clamp=True)
        return self._start(request, stream)

    # ---- embeddings -----------------------------------------------------------

    @staticmethod
    def _embedding_items(input: EmbeddingInput) -> Tuple[bool, Sequence[Any]]:
        """(whether input is one item, the items): a text or a token list is one."""
        if isinstance(input, (str, bytes)):
            return True, [input]
        if not isinstance(input, Sequence):
            raise TypeError("input must be a text, a token list, or a list of either")
        if not input:
            raise InvalidArgumentError("input is empty")
        if all(isinstance(t, int) and not isinstance(t, bool) for t in input):
            return True, [input]
        return False, input

    def _embed_items(self, items: Sequence[Any], normalize: bool,
                     truncate: bool) -> Tuple[List[List[float]], int]:
        """The vectors of items (texts or token lists) and the tokens they took."""
        as_bool("normalize", normalize)
        as_bool("truncate", truncate)
        token_lists: List[List[int]] = []
        for i, item in enumerate(items):
            ids = (self.tokenize(item) if isinstance(item, (str, bytes))
                   else self._check_tokens(f"input[{i}]", item))
            token_lists.append(ids[: self.n_ctx] if truncate else ids)
        # The model's pooled context: a call does not allocate its cells anew, and
        # the vectors do not depend on how many sequences the context has.
        ctx = self._borrow_context()
        try:
            vectors = ctx.embed(token_lists, normalize)
        finally:
            self._give_back(ctx)
        return vectors, sum(len(ids) for ids in token_lists)

    def embed(self, input: EmbeddingInput, *, normalize: bool = True,
              truncate: bool = False) -> Union[List[float], List[List[float]]]:
        """Pooled vectors of an embedding model (Model(..., embedding=True)).

        input: a text or a token list (one vector back), or a list of texts or
        of token lists (a list of vectors back, in order). Texts are tokenized
        with the model's special tokens (BOS/EOS as its metadata says), as
        llama.cpp's llama-embedding does. normalize: L2 norm 1 (the default,
        as `ferrox embed` and llama-server). truncate: an input longer than
        the context's cells keeps its first n_ctx tokens; otherwise it is
        refused. The inputs share decodes, up to n_seq_max at a time; each
        vector is the one the input gets alone.
        """
        single, items = self._embedding_items(input)
        vectors, _ = self._embed_items(items, normalize, truncate)
        return vectors[0] if single else vectors

    def create_embedding(self, input: EmbeddingInput, model: Optional[str] = None, *,
                         normalize: bool = True, truncate: bool = False) -> Dict[str, Any]:
        """embed() in the OpenAI response shape (llama-cpp-python's call of this name)."""
        _, items = self._embedding_items(input)
        vectors, n_tokens = self._embed_items(items, normalize, truncate)
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v}
                     for i, v in enumerate(vectors)],
            "model": model if model is not None else os.path.basename(os.fsdecode(self.path)),
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }

    def context(self, *, n_ctx: int = 0, n_seq: int = 1, n_batch: int = 0,
                profile: bool = False) -> Context:
        """A new Context over this model (see Context)."""
        return Context(self, n_ctx=n_ctx, n_seq=n_seq, n_batch=n_batch, profile=profile)

    def batched(self, prompts: Sequence[Prompt], max_tokens: int = 128, *,
                n_ctx: int = 0, seed: Union[None, int, Sequence[int]] = None,
                **kwargs: Any) -> List[Completion]:
        """Generates for several prompts in one context (Context.generate), then frees it.

        n_ctx: the context's cells; 0: the model's n_ctx.
        """
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
            raise TypeError("prompts must be a list of prompts")
        n = len(prompts)
        as_int("number of prompts", n, 1, _lib.CONTEXT_MAX_SEQUENCES)
        with Context(self, n_ctx=n_ctx, n_seq=n) as ctx:
            return ctx.generate(prompts, max_tokens, seed=seed, **kwargs)
