#!/usr/bin/env python3
"""Time to first token of one model while the server loads and unloads another
(issue 38's target: a model switch under load raises the other model's p99 TTFT
by no more than 20%).

One `ferrox serve --models-dir` with two models, `a` and `b` (both Gemma 3 270M:
hard links to one file where the filesystem allows, else copies, in a private
temporary folder). Model `a` is kept busy by `--load` streaming clients, and one
more client measures its time to first token, sample after sample:

- quiet: nothing else happens;
- b resident: another client asks `b` (loaded once before the phase and kept) for
  a few tokens, back to back (`--switches` times): what two models computing on
  the same cores cost a, without any load or unload;
- switching: the same requests with `keep_alive: 0`, so that `b` is loaded,
  answers and is unloaded again and again while `a` streams.
In the last two, a's samples are taken for as long as b's requests last (and at
least `--samples` of them). The switch itself is the difference between them.

Prints each phase's p50 and p99, the ratios of the loud phases' p99 to the quiet
one's and of the switching phase's to the resident one's, the number of loads of
`b` during the switching phase and b's own request times (its load included).
Run by hand:

    FERROX_BIN=build/release/bin/ferrox python3 bench/model_switch_ttft.py [--samples 40]

The model is Gemma 3 270M (ci/fetch-model.sh; FERROX_GEMMA_MODEL overrides); exit
77 without it or without a built ferrox. With --json, one JSON document.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "server"))
import conftest  # noqa: E402  (the tests' server helpers: free port, wait ready, stop)


def request_bytes(port: int, body: dict) -> bytes:
    data = json.dumps(body).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n")
    return head.encode() + data


def stream(port: int, body: dict, until_first_token: bool) -> float:
    """Sends a streamed completion; returns the seconds to its first token (and,
    unless `until_first_token`, reads the stream to its end first)."""
    start = time.perf_counter()
    first = None
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(request_bytes(port, {**body, "stream": True}))
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            if first is None and b'"text"' in got:
                first = time.perf_counter() - start
                if until_first_token:
                    break
    if first is None:
        raise RuntimeError(f"the stream ended before a token: {got[:300]!r}")
    if not until_first_token and b"[DONE]" not in got:
        raise RuntimeError(f"the stream ended without [DONE]: {got[-300:]!r}")
    return first


def ask_b(port: int, unload: bool) -> float:
    """One non-streamed request to `b` (that unloads it after answering, with
    `unload`); its seconds."""
    body = {"model": "b", "prompt": "One two three", "max_tokens": 4, "temperature": 0}
    if unload:
        body["keep_alive"] = 0
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(request_bytes(port, body))
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    if not got.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"model b answered {got[:300]!r}")
    return time.perf_counter() - start


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def measure(port: int, samples: int) -> list[float]:
    body = {"model": "a", "prompt": "Hello there, tell me", "max_tokens": 2, "temperature": 0}
    return [stream(port, body, until_first_token=True) for _ in range(samples)]


def keep_busy(port: int, stop: threading.Event, errors: list[str]) -> None:
    body = {"model": "a", "prompt": "Write a long story about a river.", "max_tokens": 64,
            "temperature": 0}
    while not stop.is_set():
        try:
            stream(port, body, until_first_token=False)
        except (RuntimeError, OSError) as e:
            errors.append(f"load client: {e}")
            return


def ask_b_repeatedly(port: int, times: list[float], errors: list[str], requests: int, unload: bool) -> None:
    for _ in range(requests):
        try:
            times.append(ask_b(port, unload))
        except (RuntimeError, OSError) as e:
            errors.append(f"b's client: {e}")
            return


def measure_while_b_works(port: int, samples: int, requests: int, unload: bool,
                          errors: list[str]) -> tuple[list[float], list[float]]:
    """a's TTFT samples while another client sends `requests` requests to b, for as
    long as they last and at least `samples` of them; and b's request times."""
    b_times: list[float] = []
    client = threading.Thread(target=ask_b_repeatedly, args=(port, b_times, errors, requests, unload))
    client.start()
    a_times: list[float] = []
    while client.is_alive() or len(a_times) < samples:
        a_times += measure(port, 1)
    client.join()
    return a_times, b_times


def model_folder(source: pathlib.Path) -> pathlib.Path:
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ferrox-switch-"))
    os.chmod(folder, 0o700)
    for name in ("a", "b"):
        target = folder / f"{name}.gguf"
        try:
            os.link(source, target)
        except OSError:  # another filesystem, or links not allowed: a copy
            shutil.copyfile(source, target)
            os.chmod(target, 0o644)
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=40, help="TTFT samples per phase (1..10000)")
    ap.add_argument("--switches", type=int, default=8,
                    help="loads and unloads of b in the switching phase (1..1000, default 8)")
    ap.add_argument("--load", type=int, default=1,
                    help="streaming clients keeping model a busy (0..8, default 1)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()
    if not 1 <= args.samples <= 10000:
        ap.error("--samples must be in 1..10000")
    if not 1 <= args.switches <= 1000:
        ap.error("--switches must be in 1..1000")
    if not 0 <= args.load <= 8:
        ap.error("--load must be in 0..8")
    source = pathlib.Path(conftest.MODEL)
    if not source.exists():
        return skip(f"no model at {source} (ci/fetch-model.sh)")
    folder = model_folder(source)
    errors: list[str] = []
    try:
        # a's sequences: the load clients and the measuring one.
        with serving(folder, "--parallel", str(args.load + 1), "--keep-alive", "-1",
                              "-c", str(1024 * (args.load + 1))) as server:
            stop_busy = threading.Event()
            busy = [threading.Thread(target=keep_busy, args=(server.port, stop_busy, errors))
                    for _ in range(args.load)]
            for t in busy:
                t.start()
            measure(server.port, 3)  # warm: a loaded, its first pages read
            quiet = measure(server.port, args.samples)
            ask_b(server.port, unload=False)  # b loaded, and kept (--keep-alive -1)
            resident, _ = measure_while_b_works(server.port, args.samples, args.switches, False, errors)
            ask_b(server.port, unload=True)  # b unloaded: each request below loads it
            loads_before = server.metrics().get('ferrox:model_loads_total{model="b"}')
            loud, b_times = measure_while_b_works(server.port, args.samples, args.switches, True, errors)
            stop_busy.set()
            for t in busy:
                t.join()
            loads_after = server.metrics().get('ferrox:model_loads_total{model="b"}')
            loads = None if loads_before is None or loads_after is None else \
                int(loads_after) - int(loads_before)
    finally:
        shutil.rmtree(folder)
    if errors:
        print("model_switch_ttft: " + "; ".join(errors), file=sys.stderr)
        return 1
    if loads is None or loads != len(b_times):
        # keep_alive 0 must unload b after each request, so each one loads it:
        # anything else measured something other than switches.
        print(f"model_switch_ttft: {len(b_times)} requests to b but {loads} loads",
              file=sys.stderr)
        return 1
    row = {"quiet_samples": len(quiet), "resident_samples": len(resident), "switching_samples": len(loud),
           "load_clients": args.load,
           "quiet_p50_ms": statistics.median(quiet) * 1e3, "quiet_p99_ms": p99(quiet) * 1e3,
           "resident_p50_ms": statistics.median(resident) * 1e3, "resident_p99_ms": p99(resident) * 1e3,
           "switching_p50_ms": statistics.median(loud) * 1e3,
           "switching_p99_ms": p99(loud) * 1e3,
           "b_requests": len(b_times), "b_loads": int(loads),
           "b_request_p50_ms": statistics.median(b_times) * 1e3}
    row["p99_ratio"] = row["switching_p99_ms"] / row["quiet_p99_ms"]
    row["resident_p99_ratio"] = row["resident_p99_ms"] / row["quiet_p99_ms"]
    row["switch_over_resident_p99_ratio"] = row["switching_p99_ms"] / row["resident_p99_ms"]
    if args.json:
        print(json.dumps(row, indent=1))
    else:
        print(f"a's TTFT, {args.load} load client(s), {len(quiet)} and {len(loud)} samples: "
              f"quiet p50 {row['quiet_p50_ms']:.0f} ms, p99 {row['quiet_p99_ms']:.0f} ms; while a resident b "
              f"answers p50 {row['resident_p50_ms']:.0f} ms, p99 {row['resident_p99_ms']:.0f} ms "
              f"({row['resident_p99_ratio']:.2f}x); while b switches p50 "
              f"{row['switching_p50_ms']:.0f} ms, p99 {row['switching_p99_ms']:.0f} ms "
              f"({row['p99_ratio']:.2f}x; {row['switch_over_resident_p99_ratio']:.2f}x resident); "
              f"b: {len(b_times)} switching requests "
              f"({row['b_loads']} loads), p50 "
              f"{row['b_request_p50_ms']:.0f} ms each", flush=True)
    return 0


class SwitchServer(conftest.Server):
    """conftest's Server, started with --models-dir instead of -m."""

    def __init__(self, folder: pathlib.Path, *args: str):
        if not conftest.FERROX or not pathlib.Path(conftest.FERROX).exists():
            raise SystemExit(skip("FERROX_BIN is not set to the built ferrox"))
        self.port = conftest.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = pathlib.Path(tempfile.gettempdir()) / f"ferrox-serve-{self.port}.log"
        self.log = open(self.log_path, "w+b")
        env = {k: v for k, v in os.environ.items()
               if k not in ("FERROX_CONFIG", "FERROX_PLUGIN_PATH", "FERROX_API_KEY")}
        env["XDG_CONFIG_HOME"] = "/nonexistent"
        self.proc = subprocess.Popen(
            [conftest.FERROX, "serve", "--models-dir", str(folder), "--port", str(self.port),
             "-t", "2", *args],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        self.wait_ready()


@contextlib.contextmanager
def serving(folder: pathlib.Path, *args: str):
    server = SwitchServer(folder, *args)
    try:
        yield server
    finally:
        code = server.stop()
        if code != 0:
            raise RuntimeError(f"ferrox serve exited {code}:\n{server.text_log()}")


def skip(why: str) -> int:
    print(f"model_switch_ttft: skipped: {why}", file=sys.stderr)
    return 77


if __name__ == "__main__":
    sys.exit(main())
