"""The settings of a ferrox Ray Serve application: what the `args:` of a Ray
Serve config file (or `build_app`) may say, checked before any process starts.

Each ferrox setting becomes the `ferrox serve` flag of the same meaning
(docs/config.md); the rest are the proxy's own. Unknown keys are refused, so a
misspelt setting is an error naming it rather than a default silently kept.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, Mapping

# The `ferrox serve` settings passed through as flags: key -> flag.
_FLAGS = {
    "context": "--ctx-size",
    "kv_type": "--kv-type",
    "kv_type_k": "--cache-type-k",
    "kv_type_v": "--cache-type-v",
    "api_key_file": "--api-key-file",
    "alias": "--alias",
    "max_queue": "--max-queue",
    "request_timeout": "--request-timeout",
    "drain_timeout": "--drain-timeout",
    "max_body_bytes": "--max-body-bytes",
}


class SettingsError(ValueError):
    """A setting of the application that cannot be used; the message names it."""


@dataclasses.dataclass(frozen=True)
class FerroxSettings:
    model: str
    ferrox_bin: str = ""
    threads: int = 1
    parallel: int = 4
    context: int | None = None
    kv_type: str | None = None
    kv_type_k: str | None = None  # K's and V's caches apart (-ctk / -ctv), over kv_type
    kv_type_v: str | None = None
    api_key_file: str | None = None
    alias: str | None = None
    max_queue: int | None = None
    request_timeout: int = 600
    drain_timeout: int = 30
    max_body_bytes: str | None = None
    extra_args: tuple[str, ...] = ()
    # The proxy's own.
    startup_timeout_s: float = 300.0
    attempts: int = 6
    proxy_max_body_bytes: int = 4 << 20
    # A stream's chunks that arrive within this many ms of a pending one cross
    # Ray as one message (0: each as the child wrote it); the first never waits.
    stream_interval_ms: int = 0

    @classmethod
    def from_mapping(cls, args: Mapping[str, Any]) -> "FerroxSettings":
        if not isinstance(args, Mapping):
            raise SettingsError(f"ferrox settings: expected a mapping, got {type(args).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(args) - set(fields))
        if unknown:
            raise SettingsError(f"ferrox settings: unknown key(s) {unknown}; known: {sorted(fields)}")
        if not isinstance(args.get("model"), str) or not args["model"]:
            raise SettingsError("ferrox settings: `model` (a GGUF path or model reference) is required")
        values: dict[str, Any] = {}
        for key, value in args.items():
            values[key] = _checked(key, value)
        settings = cls(**values)
        if not settings.ferrox_bin:
            found = os.environ.get("FERROX_BIN") or shutil.which("ferrox")
            if not found:
                raise SettingsError("ferrox settings: `ferrox_bin` is not set, $FERROX_BIN is empty "
                                    "and no `ferrox` is on PATH")
            settings = dataclasses.replace(settings, ferrox_bin=found)
        return settings

    def as_dict(self) -> dict[str, Any]:
        """The settings as from_mapping takes them back (unset ones left out)."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        out["extra_args"] = list(self.extra_args)
        return out

    def serve_argv(self, port: int) -> list[str]:
        """The child's command line: loopback only, whatever the application binds."""
        argv = [self.ferrox_bin, "serve", "-m", self.model, "--host", "127.0.0.1",
                "--port", str(port), "-t", str(self.threads), "--parallel", str(self.parallel)]
        for key, flag in _FLAGS.items():
            value = getattr(self, key)
            if value is not None:
                argv += [flag, str(value)]
        return argv + list(self.extra_args)


# key -> (type, low, high); None: no range.
_INTS = {"threads": (1, 1024), "parallel": (1, 64), "context": (0, 1 << 20),
         "max_queue": (0, 65536), "request_timeout": (1, 86400), "drain_timeout": (0, 86400),
         "attempts": (1, 10), "proxy_max_body_bytes": (1024, 1 << 30),
         "stream_interval_ms": (0, 1000)}
_KV_KINDS = ("f32", "f16", "q8_0", "q4_0")
_KV_KEYS = ("kv_type", "kv_type_k", "kv_type_v")
_STRINGS = ("model", "ferrox_bin", *_KV_KEYS, "api_key_file", "alias", "max_body_bytes")


def _checked(key: str, value: Any) -> Any:
    if key in _INTS:
        low, high = _INTS[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SettingsError(f"ferrox settings: `{key}` must be an integer {low}..{high}, got {value!r}")
        return value
    if key in _STRINGS:
        if not isinstance(value, str) or not value or "\0" in value:
            raise SettingsError(f"ferrox settings: `{key}` must be a non-empty string, got {value!r}")
        if key in _KV_KEYS and value not in _KV_KINDS:
            raise SettingsError(f"ferrox settings: `{key}` must be one of {', '.join(_KV_KINDS)}, "
                                f"got {value!r}")
        return value
    if key == "extra_args":
        if not isinstance(value, (list, tuple)) or len(value) > 64 or not all(
                isinstance(a, str) and "\0" not in a for a in value):
            raise SettingsError("ferrox settings: `extra_args` must be a list of at most 64 strings")
        if any(a.split("=")[0] in ("--host", "--port") for a in value):
            raise SettingsError("ferrox settings: `extra_args` may not set --host or --port "
                                "(the child always binds a loopback port of its own)")
        return tuple(value)
    if key == "startup_timeout_s":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 3600:
            raise SettingsError(f"ferrox settings: `startup_timeout_s` must be 1..3600, got {value!r}")
        return float(value)
    raise SettingsError(f"ferrox settings: unknown key {key!r}")
