#!/usr/bin/env python3
"""Time to first token of a well-behaved streamed client, quiet and while other
clients abuse the server (issue 40's target: p99 under abuse within 2x of quiet).

Abuse kinds: 4 clients sending 4 MiB /tokenize bodies; one client sending
completions with a 1024-entry logit_bias, back to back (it holds one of the two
sequences, so what the other client sees is the cost of its steps, not a queue);
4 clients opening floods of idle connections. Each abuser is its own process
that reads its answers in linear time: abusers as threads of this process held
the GIL while they copied 8 MB answers, and the measuring thread waited for it,
which timed the client, not the server. The abusers still share this machine's
CPUs with the server (they would not on a real deployment); --abuser-nice 19
runs them at the lowest priority to see the server's share alone. Run by hand:

    FERROX_BIN=build/release/bin/ferrox python3 bench/serve_abuse_ttft.py [--samples 30]

The model is Gemma 3 270M (ci/fetch-model.sh; FERROX_GEMMA_MODEL overrides).
Prints one line per kind and, with --json, one JSON document.
"""
import argparse
import json
import multiprocessing
import os
import pathlib
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "server"))
import conftest  # noqa: E402  (the tests' server fixture: start, wait ready, stop)
from test_abuse import KEY_A, raw  # noqa: E402


def ttft(port: int) -> float:
    body = json.dumps({"prompt": "Hello there, tell me", "max_tokens": 2, "stream": True,
                       "temperature": 0}).encode()
    start = time.perf_counter()
    # From another loopback address than the abusers: the server caps connections
    # per client address, and the well-behaved client is a different client.
    with socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) as s:
        s.sendall(raw(port, "POST", "/v1/completions", body, {"Connection": "close"}))
        got = b""
        while b'"text"' not in got:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError(f"the server closed the stream before a token: {got[:200]!r}")
            got += chunk
    return time.perf_counter() - start


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def exchange(port: int, data: bytes, timeout: float) -> None:
    """Sends one request and reads until the server closes (Connection: close),
    keeping nothing: linear in the answer's size."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        try:
            sock.sendall(data)
            sock.settimeout(timeout)
            while sock.recv(1 << 20):
                pass
        except (socket.timeout, ConnectionError):
            pass


def abuse(port: int, kind: str, stop, nice: int) -> None:
    os.nice(nice)
    big = json.dumps({"content": "owl river " * 400000}).encode()  # 4 MiB
    bias = json.dumps({"prompt": "x", "max_tokens": 64,
                       "logit_bias": {str(i): 1 for i in range(1024)}}).encode()
    while not stop.is_set():
        if kind == "tokenize":
            exchange(port, raw(port, "POST", "/tokenize", big, {"Connection": "close"}), 60)
        elif kind == "logit_bias":
            exchange(port, raw(port, "POST", "/v1/completions", bias, {"Connection": "close"}), 60)
        else:
            socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
            time.sleep(1)
            for c in socks:
                c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=30, help="TTFT samples per phase")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--abuser-nice", type=int, default=0, choices=range(0, 20), metavar="0..19",
                    help="the abusing processes' nice value (default 0)")
    ap.add_argument("--kinds", default="tokenize,logit_bias,idle",
                    help="which abuse kinds to run, comma-separated (default all three)")
    args = ap.parse_args()
    if args.samples < 1 or args.samples > 10000:
        ap.error("--samples must be in 1..10000")
    kinds = args.kinds.split(",")
    if not kinds or any(k not in ("tokenize", "logit_bias", "idle") for k in kinds):
        ap.error("--kinds takes tokenize, logit_bias and idle")
    keys = pathlib.Path("/tmp") / f"ferrox-ttft-keys-{threading.get_native_id()}.txt"
    keys.write_text(KEY_A + "\n")
    rows = []
    try:
        with conftest.running("--api-key-file", str(keys), "--parallel", "2", "-c", "2048",
                              "--request-memory", "256MiB") as server:
            for _ in range(3):
                ttft(server.port)
            quiet = [ttft(server.port) for _ in range(args.samples)]
            for kind in kinds:
                stop = multiprocessing.Event()
                clients = 1 if kind == "logit_bias" else 4
                threads = [multiprocessing.Process(target=abuse,
                                                   args=(server.port, kind, stop, args.abuser_nice))
                           for _ in range(clients)]
                for t in threads:
                    t.start()
                time.sleep(1)
                loud = [ttft(server.port) for _ in range(args.samples)]
                stop.set()
                for t in threads:
                    t.join()
                row = {"kind": kind, "quiet_p50_ms": statistics.median(quiet) * 1e3,
                       "quiet_p99_ms": p99(quiet) * 1e3,
                       "abuse_p50_ms": statistics.median(loud) * 1e3,
                       "abuse_p99_ms": p99(loud) * 1e3}
                row["p99_ratio"] = row["abuse_p99_ms"] / row["quiet_p99_ms"]
                rows.append(row)
                if not args.json:
                    print(f"{kind}: quiet p50 {row['quiet_p50_ms']:.0f} ms, p99 "
                          f"{row['quiet_p99_ms']:.0f} ms; under abuse p50 "
                          f"{row['abuse_p50_ms']:.0f} ms, p99 {row['abuse_p99_ms']:.0f} ms "
                          f"({row['p99_ratio']:.2f}x)", flush=True)
    finally:
        keys.unlink(missing_ok=True)
    if args.json:
        print(json.dumps({"samples": args.samples, "abuser_nice": args.abuser_nice,
                          "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    import pytest

    try:
        sys.exit(main())
    except pytest.skip.Exception as why:  # no built ferrox or no model: nothing to measure
        print(f"serve_abuse_ttft: skipped: {why}", file=sys.stderr)
        sys.exit(77)
