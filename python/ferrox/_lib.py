"""ctypes declarations of ferrox.h (API 0.6) and the loading of libferrox_core.

Declarations only: the structs, enums, bounds and prototypes as the header
writes them, and where the library is found. Nothing here decides behaviour;
the classes in model.py, context.py and generation.py do.

The library is looked for, in order:
  1. $FERROX_LIBRARY (a path to libferrox_core.so*, e.g. build/ci/lib/libferrox_core.so);
  2. the copy inside this package (ferrox/_native/lib/, what the wheel carries);
  3. the system's (libferrox-dev / the ferrox Debian package), by the linker's search.

ctypes.CDLL calls release the GIL for the length of each foreign call (PyDLL
would hold it), so a decode on one thread lets other Python threads run.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Optional

# The API this binding was written against; a library of another major, or of
# an older minor, is refused when the package is imported.
API_MAJOR = 0
API_MINOR = 9

# ferrox_code
OK = 0
INVALID_ARGUMENT = 1
NO_ROOM = 2
IO = 3
BACKEND = 4
CANCELLED = 5
BUSY = 6
BUFFER_TOO_SMALL = 7
GRAMMAR = 8

# ferrox_grammar_state
GRAMMAR_NONE = 0
GRAMMAR_OPEN = 1
GRAMMAR_COMPLETE = 2
GRAMMAR_ENDED = 3
GRAMMAR_FAILED = 4

# ferrox_kv_kind
KV_SAME = -1  # kv_value_kind only: kv_kind's (0.9)
KV_F32 = 0
KV_F16 = 1
KV_Q8_0 = 2
KV_Q4_0 = 3

STATUS_MESSAGE_CAPACITY = 512

# Bounds the header states (the #defines of ferrox.h, and the detok stream's
# documented limits); test_header_constants holds them to the header's text.
CHAT_MAX_MESSAGES = 65536
CHAT_MAX_ROLE = 64
CHAT_MAX_CONTENT = 16 << 20
CHAT_MAX_JSON = 4 << 20
CHAT_MAX_ANSWER = 16 << 20
DETOK_MAX_STOPS = 64
DETOK_MAX_STOP_BYTES = 1024
CONTEXT_MAX_SEQUENCES = 64
GRAMMAR_MAX_BYTES = 256 << 10
JSON_SCHEMA_MAX_BYTES = 1 << 20


class CallStatus(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("code", c_int),
        ("message", c_char * STATUS_MESSAGE_CAPACITY),
        ("cells_needed", c_uint32),
        ("cells_free", c_uint32),
    ]


ProgressFn = CFUNCTYPE(c_int, c_float, c_void_p)


class ModelParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("config_path", c_char_p),
        ("backends", POINTER(c_char_p)),
        ("n_backends", c_uint32),
        ("plugin_dirs", POINTER(c_char_p)),
        ("n_plugin_dirs", c_uint32),
        ("threads", c_uint32),
        ("kv_kind", c_int),
        ("n_ctx_max", c_uint32),
        ("n_batch_max", c_uint32),
        ("allow_resident", c_int),
        ("progress", ProgressFn),
        ("progress_user", c_void_p),
        ("max_sequences", c_uint32),
        ("embeddings", c_int),  # 0.7
        ("kv_value_kind", c_int),  # 0.9
    ]


class Residency(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("resident", c_int),
        ("backend", c_char_p),
        ("reason", c_char_p),
    ]


class TextSegment(Structure):
    _fields_ = [("text", c_void_p), ("len", c_size_t), ("parse_special", c_int)]


class ChatMessage(Structure):
    _fields_ = [("role", c_char_p), ("content", c_void_p), ("content_len", c_size_t)]


class ChatParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("messages", POINTER(ChatMessage)),
        ("n_messages", c_size_t),
        ("messages_json", c_void_p),
        ("messages_json_len", c_size_t),
        ("tools_json", c_void_p),
        ("tools_json_len", c_size_t),
        ("add_generation_prompt", c_int),
        ("chat_template", c_char_p),
        ("template_origin", c_char_p),
        ("template_name", c_char_p),
        ("kwargs_json", c_void_p),  # API 0.5
        ("kwargs_json_len", c_size_t),
    ]


class ChatToolCall(Structure):
    _fields_ = [
        ("id", c_char_p),
        ("name", c_char_p),
        ("arguments", c_void_p),
        ("arguments_len", c_size_t),
    ]


class ChatParseParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("family", c_char_p),
        ("chat_template", c_char_p),
        ("starts_in_reasoning", c_int),
        ("id_seed", c_uint64),
    ]


class ContextParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("n_ctx", c_uint32),
        ("n_seq", c_uint32),
        ("n_batch", c_uint32),
        ("profile", c_int),
    ]


class Batch(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("n_tokens", c_uint32),
        ("tokens", POINTER(c_int32)),
        ("positions", POINTER(c_int32)),
        ("seq_ids", POINTER(c_int32)),
        ("logits", POINTER(c_uint8)),
    ]


class LogitBias(Structure):
    _fields_ = [("token", c_int32), ("bias", c_float)]


class SamplerParams(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("temperature", c_float),
        ("top_k", c_uint32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_uint32),
        ("frequency_penalty", c_float),
        ("presence_penalty", c_float),
        ("seed", c_uint64),
        ("logit_bias", POINTER(LogitBias)),
        ("n_logit_bias", c_uint32),
        ("model", c_void_p),  # API 0.6
        ("grammar", c_void_p),
        ("grammar_len", c_size_t),
        ("json_schema", c_void_p),
        ("json_schema_len", c_size_t),
    ]


_code = c_int
_status_p = POINTER(CallStatus)
_model_p = c_void_p
_ctx_p = c_void_p
_size_p = POINTER(c_size_t)

# name: (restype, argtypes)
PROTOTYPES = {
    "ferrox_api_version": (c_uint32, []),
    "ferrox_code_name": (c_char_p, [c_int]),
    # model
    # The *_default functions are what programs built before 0.6 call (they
    # write that version's struct); the binding uses *_init with its own size.
    "ferrox_model_params_default": (None, [POINTER(ModelParams)]),
    "ferrox_model_params_init": (None, [POINTER(ModelParams), c_size_t]),
    "ferrox_model_load": (_code, [c_char_p, POINTER(ModelParams), POINTER(c_void_p), _status_p]),
    "ferrox_model_free": (None, [_model_p]),
    "ferrox_model_vocab": (c_uint32, [_model_p]),
    "ferrox_model_n_ctx_train": (c_uint32, [_model_p]),
    "ferrox_model_bos": (c_int32, [_model_p]),
    "ferrox_model_eos": (c_int32, [_model_p]),
    "ferrox_model_is_end_of_generation": (c_int, [_model_p, c_int32]),
    "ferrox_model_meta": (_code, [_model_p, c_char_p, c_void_p, c_size_t, _size_p, _status_p]),
    "ferrox_model_chat_template": (_code, [_model_p, POINTER(c_char_p), _status_p]),
    "ferrox_model_arch": (c_char_p, [_model_p]),
    "ferrox_model_n_layer": (c_uint32, [_model_p]),
    "ferrox_model_n_embd": (c_uint32, [_model_p]),
    "ferrox_model_is_recurrent": (c_int, [_model_p]),  # 0.8
    "ferrox_model_n_ctx": (c_uint32, [_model_p]),
    "ferrox_model_n_batch": (c_uint32, [_model_p]),
    "ferrox_model_capacity_summary": (_code, [_model_p, POINTER(c_char_p), _status_p]),
    "ferrox_model_residency": (_code, [_model_p, POINTER(Residency), _status_p]),
    "ferrox_model_kernel_calls": (
        _code,
        [_model_p, POINTER(c_uint64), POINTER(c_uint64), _status_p],
    ),
    "ferrox_model_kernel_report": (_code, [_model_p, c_void_p, c_size_t, _size_p, _status_p]),
    # text
    "ferrox_tokenize": (
        _code,
        [_model_p, c_void_p, c_size_t, c_int, c_int, POINTER(c_int32), c_size_t, _size_p,
         _status_p],
    ),
    "ferrox_tokenize_segments": (
        _code,
        [_model_p, POINTER(TextSegment), c_size_t, c_int, POINTER(c_int32), c_size_t, _size_p,
         _status_p],
    ),
    "ferrox_detokenize": (
        _code,
        [_model_p, POINTER(c_int32), c_size_t, c_void_p, c_size_t, _size_p, _status_p],
    ),
    "ferrox_token_text": (_code, [_model_p, c_int32, c_void_p, c_size_t, _size_p, _status_p]),
    "ferrox_detok_stream_new": (_code, [_model_p, POINTER(c_void_p), _status_p]),
    "ferrox_detok_stream_free": (None, [c_void_p]),
    "ferrox_detok_stream_push": (
        _code,
        [c_void_p, c_int32, c_void_p, c_size_t, _size_p, _status_p],
    ),
    "ferrox_detok_stream_add_stop": (_code, [c_void_p, c_void_p, c_size_t, _status_p]),
    "ferrox_detok_stream_stopped": (c_int, [c_void_p]),
    # chat
    "ferrox_chat_params_default": (None, [POINTER(ChatParams)]),
    "ferrox_chat_params_init": (None, [POINTER(ChatParams), c_size_t]),
    "ferrox_chat_apply_template": (
        _code,
        [_model_p, POINTER(ChatParams), POINTER(c_void_p), _status_p],
    ),
    "ferrox_chat_prompt_free": (None, [c_void_p]),
    "ferrox_chat_prompt_text": (c_void_p, [c_void_p, _size_p]),
    "ferrox_chat_prompt_segments": (POINTER(TextSegment), [c_void_p, _size_p]),
    "ferrox_chat_prompt_tokens": (POINTER(c_int32), [c_void_p, _size_p]),
    "ferrox_chat_prompt_template": (c_char_p, [c_void_p]),
    "ferrox_chat_parse_params_default": (None, [POINTER(ChatParseParams)]),
    "ferrox_chat_parse_params_init": (None, [POINTER(ChatParseParams), c_size_t]),
    "ferrox_chat_parse": (
        _code,
        [_model_p, POINTER(ChatParseParams), c_void_p, c_size_t, POINTER(c_void_p), _status_p],
    ),
    "ferrox_chat_parsed_free": (None, [c_void_p]),
    "ferrox_chat_parsed_family": (c_char_p, [c_void_p]),
    "ferrox_chat_parsed_content": (c_void_p, [c_void_p, _size_p]),
    "ferrox_chat_parsed_reasoning": (c_void_p, [c_void_p, _size_p]),
    "ferrox_chat_parsed_n_tool_calls": (c_size_t, [c_void_p]),
    "ferrox_chat_parsed_tool_call": (POINTER(ChatToolCall), [c_void_p, c_size_t]),
    # context
    "ferrox_context_params_default": (None, [POINTER(ContextParams)]),
    "ferrox_context_params_init": (None, [POINTER(ContextParams), c_size_t]),
    "ferrox_context_new": (
        _code,
        [_model_p, POINTER(ContextParams), POINTER(c_void_p), _status_p],
    ),
    "ferrox_context_free": (None, [_ctx_p]),
    "ferrox_decode": (_code, [_ctx_p, POINTER(Batch), _status_p]),
    "ferrox_logits": (_code, [_ctx_p, c_uint32, POINTER(POINTER(c_float)), _status_p]),
    # embeddings (0.7)
    "ferrox_model_pooling": (c_int, [_model_p]),
    "ferrox_embed": (
        _code,
        [_ctx_p, c_size_t, POINTER(POINTER(c_int32)), POINTER(c_size_t), c_int, POINTER(c_float), c_size_t, _status_p],
    ),
    "ferrox_seq_remove": (_code, [_ctx_p, c_int32, c_int32, c_int32, _status_p]),
    "ferrox_seq_copy": (_code, [_ctx_p, c_int32, c_int32, c_int32, c_int32, _status_p]),
    "ferrox_seq_keep": (_code, [_ctx_p, c_int32, _status_p]),
    "ferrox_kv_clear": (_code, [_ctx_p, _status_p]),
    "ferrox_seq_pos_range": (
        _code,
        [_ctx_p, c_int32, POINTER(c_int32), POINTER(c_int32), _status_p],
    ),
    "ferrox_kv_usage": (_code, [_ctx_p, POINTER(c_uint32), POINTER(c_uint32), _status_p]),
    "ferrox_context_profile": (_code, [_ctx_p, POINTER(c_char_p), _status_p]),
    "ferrox_context_profile_reset": (_code, [_ctx_p, _status_p]),
    # sampling
    "ferrox_sampler_params_default": (None, [POINTER(SamplerParams)]),
    "ferrox_sampler_params_init": (None, [POINTER(SamplerParams), c_size_t]),
    "ferrox_sampler_new": (_code, [POINTER(SamplerParams), POINTER(c_void_p), _status_p]),
    "ferrox_sampler_free": (None, [c_void_p]),
    "ferrox_sampler_sample": (
        _code,
        [c_void_p, POINTER(c_float), c_uint32, POINTER(c_int32), _status_p],
    ),
    "ferrox_sampler_accept": (_code, [c_void_p, POINTER(c_int32), c_size_t, _status_p]),
    "ferrox_sampler_accept_token": (_code, [c_void_p, c_int32, _status_p]),
    "ferrox_sampler_grammar_state": (c_int, [c_void_p]),
    "ferrox_sampler_reset": (_code, [c_void_p, _status_p]),
    # per-sequence state
    "ferrox_seq_state_save": (
        _code,
        [_ctx_p, c_int32, c_void_p, c_size_t, _size_p, _status_p],
    ),
    "ferrox_seq_state_restore": (_code, [_ctx_p, c_int32, c_void_p, c_size_t, _status_p]),
    "ferrox_seq_state_save_file": (_code, [_ctx_p, c_int32, c_char_p, _status_p]),
    "ferrox_seq_state_restore_file": (_code, [_ctx_p, c_int32, c_char_p, _status_p]),
    # recurrent-state checkpoints (0.9)
    "ferrox_checkpoint_size": (c_size_t, [_ctx_p]),
    "ferrox_seq_checkpoint": (_code, [_ctx_p, c_int32, c_void_p, c_size_t, _size_p, _status_p]),
    "ferrox_seq_rewind": (_code, [_ctx_p, c_int32, c_void_p, c_size_t, _status_p]),
}

PACKAGE_NATIVE_DIR = Path(__file__).resolve().parent / "_native" / "lib"


def _candidates() -> list:
    found = []
    env = os.environ.get("FERROX_LIBRARY")
    if env:
        found.append(Path(env))
        return found  # asked for one library: never fall back to another silently
    bundled = sorted(PACKAGE_NATIVE_DIR.glob("libferrox_core.so*"))
    found.extend(bundled)
    system = ctypes.util.find_library("ferrox_core")
    if system:
        found.append(Path(system))
    return found


def _open() -> tuple:
    tried = []
    for path in _candidates():
        try:
            # A bare soname (the system's) goes through the linker's search; a
            # path is opened as it is.
            lib = ctypes.CDLL(str(path) if path.parent != Path(".") else path.name)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        return lib, path
    detail = "; ".join(tried) if tried else "no candidate found"
    raise ImportError(
        "ferrox: libferrox_core could not be loaded (looked at $FERROX_LIBRARY, "
        f"{PACKAGE_NATIVE_DIR} and the system's libraries): {detail}"
    )


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


lib, library_path = _open()
_declare(lib)

_version = lib.ferrox_api_version()
api_version = (_version >> 16, _version & 0xFFFF)
if api_version[0] != API_MAJOR or api_version[1] < API_MINOR:
    raise ImportError(
        f"ferrox: {library_path} has C API {api_version[0]}.{api_version[1]}; this package "
        f"needs {API_MAJOR}.{API_MINOR} or a later {API_MAJOR}.x"
    )


def library_plugin_dir() -> Optional[Path]:
    """The plugin folder beside the loaded library (lib/ferrox/plugins), if any.

    The same layout as a build tree (build/ci/lib/ferrox/plugins), an install
    (/usr/lib/<triplet>/ferrox/plugins) and this package's _native/lib.
    """
    base = Path(os.path.realpath(library_path)) if library_path.parent != Path(".") else None
    if base is None:
        return None
    folder = base.parent / "ferrox" / "plugins"
    return folder if folder.is_dir() else None


def init_params(params: Structure) -> None:
    """ferrox_X_params_init(&params, sizeof params): the library's defaults,
    written only as far as this binding's struct goes."""
    name = {ModelParams: "model", ChatParams: "chat", ChatParseParams: "chat_parse",
            ContextParams: "context", SamplerParams: "sampler"}[type(params)]
    getattr(lib, f"ferrox_{name}_params_init")(ctypes.byref(params), ctypes.sizeof(params))


def new_status() -> CallStatus:
    st = CallStatus()
    st.struct_size = ctypes.sizeof(CallStatus)
    return st
