"""ferrox: run GGUF language models from Python, over the engine's C API (ferrox.h).

    import ferrox
    with ferrox.Model("gemma-3-270m-q4_k_m.gguf", n_threads=2) as model:
        print(model.generate("The capital of France is", max_tokens=16, seed=1).text)
        for piece in model.chat([{"role": "user", "content": "Hi!"}], stream=True):
            print(piece, end="", flush=True)

A ctypes binding: every call goes through libferrox_core's public C API, and
the GIL is released for the length of each C call (decodes included), so other
Python threads run while one decodes. See docs/python.md.
"""
from ._lib import api_version, library_path
from ._version import __version__
from .chat import ChatPrompt, ParsedAnswer
from .context import Context
from .errors import (
    BackendError,
    BufferTooSmallError,
    BusyError,
    CancelledError,
    ClosedError,
    FerroxError,
    FerroxIOError,
    GrammarError,
    InvalidArgumentError,
    InvalidGrammarError,
    NoRoomError,
)
from .generation import Completion, TextStream
from .model import Model, bundled_plugin_dirs
from .sampling import default_sampling

__all__ = [
    "BackendError",
    "BufferTooSmallError",
    "BusyError",
    "CancelledError",
    "ChatPrompt",
    "ClosedError",
    "Completion",
    "Context",
    "FerroxError",
    "FerroxIOError",
    "GrammarError",
    "InvalidArgumentError",
    "InvalidGrammarError",
    "Model",
    "NoRoomError",
    "ParsedAnswer",
    "TextStream",
    "__version__",
    "api_version",
    "bundled_plugin_dirs",
    "default_sampling",
    "library_path",
]
