"""A running `ferrox serve` on loopback for the server tests (issue 14).

The model is Gemma 3 270M (ci/fetch-model.sh). Each server gets a free port
(--port 0 is not used: the test needs to know it before reading logs), its
own config-free environment, and is stopped with SIGTERM at the end; its
exit status and log are part of what the tests check.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

FERROX = os.environ.get("FERROX_BIN", "")
MODEL = os.environ.get(
    "FERROX_GEMMA_MODEL",
    str(pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *args: str, env_extra: dict[str, str] | None = None,
                 model: str | None = None):
        model = model or MODEL
        if not FERROX or not pathlib.Path(FERROX).exists():
            pytest.skip("FERROX_BIN is not set to the built ferrox")
        if not pathlib.Path(model).exists():
            pytest.skip(f"no model at {model} (ci/fetch-model.sh or tests/model/make_tiny_models.py makes it)")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items()
               if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH", "FERROX_API_KEY")}
        env["XDG_CONFIG_HOME"] = "/nonexistent"
        env.update(env_extra or {})
        self.log_path = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"ferrox-serve-{self.port}.log"
        self.log = open(self.log_path, "w+b")
        self.proc = subprocess.Popen(
            [FERROX, "serve", "-m", model, "--port", str(self.port), "-t", "2", *args],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"ferrox serve exited {self.proc.returncode}:\n{self.text_log()}")
            status, _ = self.get("/ready")
            if status == 200:
                return
            time.sleep(0.1)
        raise AssertionError("ferrox serve did not become ready:\n" + self.text_log())

    def text_log(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def log_with(self, text: str, timeout: float = 10) -> str:
        """The log once it holds `text`: the server writes a request's line after the
        answer has gone out, so a client can read the log before it is there (seen
        under ASan). The whole log, with or without it, after `timeout`."""
        end = time.time() + timeout
        while text not in (log := self.text_log()) and time.time() < end:
            time.sleep(0.05)
        return log

    def request(self, method: str, path: str, body=None, headers: dict | None = None,
                timeout: float = 120) -> tuple[int, bytes]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (ConnectionError, urllib.error.URLError):
            return 0, b""

    def get(self, path: str, **kw) -> tuple[int, bytes]:
        return self.request("GET", path, **kw)

    def post(self, path: str, body, **kw) -> tuple[int, dict]:
        status, raw = self.request("POST", path, body, **kw)
        try:
            return status, json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return status, {"raw": raw.decode(errors="replace")}

    def metrics(self) -> dict[str, float]:
        status, raw = self.get("/metrics")
        assert status == 200, raw
        out = {}
        for line in raw.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("ferrox serve did not exit after SIGTERM:\n" + self.text_log())
        self.log.close()
        return self.proc.returncode


@contextlib.contextmanager
def running(*args: str, **kw):
    server = Server(*args, **kw)
    try:
        yield server
    finally:
        code = server.stop()
        assert code == 0, f"exit {code}:\n{server.text_log()}"


@pytest.fixture(scope="module")
def server():
    with running("--parallel", "4", "--kv-type", "f16", "-c", "4096") as s:
        yield s
