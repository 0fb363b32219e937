"""One native `ferrox serve` as a managed child process on a loopback port.

The replica owns it: starts it, waits for /ready, stops it with SIGTERM (the
server's own drain: running requests get `drain_timeout` seconds) and waits a
bound for it to exit before SIGKILL. Its log goes to the replica's stderr,
which Ray keeps per worker; ferrox logs one line per request and never a
prompt.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from ._settings import FerroxSettings

_PR_SET_PDEATHSIG = 1


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


try:  # resolved here, not in the forked child: a lookup there could take a lock
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


def _die_with_parent() -> None:
    # The child gets SIGTERM (its drain) if the thread that started it dies
    # without stopping it: Serve runs a replica's constructor on its user-code
    # thread, which lives as long as the replica.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class ChildServer:
    def __init__(self, settings: FerroxSettings):
        self.settings = settings
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._api_key = _first_key(settings.api_key_file)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def auth_headers(self) -> dict[str, str]:
        """For the replica's own calls (/metrics needs a key when keys are set)."""
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def start(self) -> None:
        self.port = _free_loopback_port()
        self.proc = subprocess.Popen(self.settings.serve_argv(self.port), stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent)
        self._wait_ready(self.settings.startup_timeout_s)

    def _wait_ready(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ferrox serve exited with status {self.proc.returncode} "
                                   "before it was ready (its log is in this replica's stderr)")
            if self.ready_status() == 200:
                return
            time.sleep(0.1)
        self.stop(5)
        raise TimeoutError(f"ferrox serve was not ready within startup_timeout_s={timeout}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready_status(self, timeout: float = 5) -> int:
        try:
            with urllib.request.urlopen(self.base + "/ready", timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except (OSError, urllib.error.URLError):
            return 0

    def stop(self, bound: float) -> int | None:
        """SIGTERM (ferrox drains), then SIGKILL if it has not exited within `bound` s."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(bound)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def _first_key(path: str | None) -> str | None:
    """The first key of a ferrox key file (one a line, # comments), else $FERROX_API_KEY."""
    if path:
        with open(path, encoding="utf-8") as f:
            for line in f.read(1 << 20).splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    return line
        return None
    return os.environ.get("FERROX_API_KEY") or None
