#!/usr/bin/env python3
"""`ferrox serve` beside llama.cpp's `llama-server`: the same streaming chat load, same model.

llama-server is built from the llama-cpp-python sdist that CI caches, into
~/.cache/ferrox/llama.cpp-<version> (once, by bench/llama_build.py; never committed).
Each round starts one server at a time (the other is not running, so neither takes CPU
from the other), waits until it is ready (ferrox: GET /ready = 200; llama-server:
GET /health = 200), sends one short warm-up request, then runs the load of
bench/openai_load.py at each --clients level, and stops it with SIGTERM. The engines
alternate, and which one goes first alternates per round, so drift on a shared machine
hits both alike. Both get the same threads, --parallel sequences, KV positions per
sequence (-c is the total both take: --ctx-per-seq x --parallel cells, shared by the
sequences) and f16 KV.

Tables: per engine and client level, median over rounds [min-max] of aggregate generated
tokens/s and of TTFT p50 and p99 (each round's percentiles over its requests); then
ferrox / llama-server. The tokens come from the servers' `usage` (or content chunks, as
the tables say).

Usage: bench/serve_vs_llama_server.py [--model M.gguf] [--ferrox build/release/bin/ferrox]
       [--clients 1,4,16] [--requests 2] [--max-tokens 64] [--threads 2] [--parallel 16]
       [--ctx-per-seq 1024] [--rounds 3] [--only llama|ferrox] [--json out.json]
       bench/serve_vs_llama_server.py --smoke [--ferrox ...]   (CI: ferrox alone, ~1 min)
Exit status: 0, or 1 when any request failed, a server did not start or ferrox did not
exit 0 after SIGTERM.
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import openai
import openai_load
from llama_build import build_llama_tool

DEFAULT_MODEL = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


class Server:
    """One server process on a free loopback port, its stderr kept in a log file."""

    def __init__(self, name: str, cmd: list[str], port: int, ready_path: str, logdir: pathlib.Path):
        self.name, self.cmd, self.port, self.ready_path = name, cmd, port, ready_path
        self.log_path = logdir / f"{name}-{port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self, n: int = 30) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(openai_load.printable(line, 400) for line in lines[-n:])

    def start(self, timeout: float) -> None:
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.port}{self.ready_path}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before it was ready:\n"
                                   f"{self.log_tail()}")
            if http_status(url) == 200:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} not ready ({url}) within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, then the exit status (None if it had to be killed)."""
        if self.proc is None:
            return None
        rc = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            rc = self.proc.returncode
        self.proc = None
        self.log.close()
        return rc


def ferrox_server(a, port: int, logdir: pathlib.Path) -> Server:
    # Every client of the load comes from 127.0.0.1, which ferrox's per-address cap
    # (server.max_client_connections, 32 by default) would hold to 32 connections.
    cmd = [a.ferrox, "serve", "-m", str(a.model), "--host", "127.0.0.1", "--port", str(port),
           "--parallel", str(a.parallel), "-c", str(a.ctx_per_seq * a.parallel), "-t", str(a.threads),
           "--kv-type", "f16", "--max-client-connections", str(max(32, 2 * max(a.clients) + 8))]
    return Server("ferrox", cmd, port, "/ready", logdir)


def llama_server(a, port: int, logdir: pathlib.Path) -> Server:
    cmd = [str(build_llama_tool("llama-server")), "-m", str(a.model), "--host", "127.0.0.1", "--port", str(port),
           "-np", str(a.parallel), "-c", str(a.ctx_per_seq * a.parallel), "-t", str(a.threads),
           "-tb", str(a.threads), "-ctk", "f16", "-ctv", "f16"]
    return Server("llama-server", cmd, port, "/health", logdir)


ENGINES = {"ferrox": ferrox_server, "llama-server": llama_server}


def run_round(name: str, a, logdir: pathlib.Path, problems: list[str]) -> dict[int, dict]:
    """One engine, every client level; returns clients -> openai_load summary."""
    server = ENGINES[name](a, free_port(), logdir)
    server.start(a.start_timeout)
    out = {}
    try:
        warm = openai_load.run_load(server.base_url, clients=1, requests=1, max_tokens=4, timeout=a.timeout)
        if warm.failures:
            problems.append(f"{name}: warm-up request failed: {warm.failures[0].error}")
        for clients in a.clients:
            res = openai_load.run_load(server.base_url, clients=clients, requests=a.requests,
                                       max_tokens=a.max_tokens, timeout=a.timeout)
            s = res.summary()
            out[clients] = s
            problems.extend(f"{name}, {clients} clients: {e}" for e in s["errors"])
            if s["generated_tokens"] == 0:
                problems.append(f"{name}, {clients} clients: no token generated")
            print(f"  {name:12s} {clients:3d} clients: {s['tokens_per_s']:7.1f} tok/s "
                  f"({s['generated_tokens']} tokens from {s['token_source']}), TTFT p50 "
                  f"{openai_load.fmt_s(s['ttft_p50_s'])} s p99 {openai_load.fmt_s(s['ttft_p99_s'])} s, "
                  f"{s['failed']} failed", file=sys.stderr)
    except openai.OpenAIError as e:  # GET /v1/models failed: nothing to measure
        raise RuntimeError(f"{name}: {openai_load.printable(str(e))}\n{server.log_tail()}") from e
    finally:
        rc = server.stop(a.stop_timeout)
    # ferrox promises a clean drain; llama-server's exit status is not ours to judge.
    if name == "ferrox" and rc != 0:
        problems.append(f"ferrox exited {rc} after SIGTERM (expected 0):\n{server.log_tail()}")
    return out


def spread(values: list[float | None], scale: float = 1.0, digits: int = 1) -> str:
    v = [x * scale for x in values if x is not None]
    if not v:
        return "-"
    return f"{statistics.median(v):.{digits}f} [{min(v):.{digits}f}-{max(v):.{digits}f}]"


def median_of(rounds: list[dict], clients: int, key: str) -> float | None:
    v = [r[clients][key] for r in rounds if r[clients][key] is not None]
    return statistics.median(v) if v else None


def print_tables(a, results: dict[str, list[dict]]) -> None:
    for name, rounds in results.items():
        if not rounds:
            continue
        sources = sorted({r[c]["token_source"] for r in rounds for c in a.clients})
        print(f"\n{name} (streaming chat, {a.requests} requests per client, max_tokens {a.max_tokens}, "
              f"{a.threads} threads, --parallel {a.parallel}, {a.ctx_per_seq} KV positions per sequence, "
              f"f16 KV; median [min-max] of {len(rounds)} rounds; tokens from {', '.join(sources)})\n")
        print("| clients | tok/s | TTFT p50 (s) | TTFT p99 (s) | tokens | failed |")
        print("|--------:|------:|-------------:|-------------:|-------:|-------:|")
        for c in a.clients:
            col = lambda k: [r[c][k] for r in rounds]  # noqa: E731
            print(f"| {c} | {spread(col('tokens_per_s'))} | {spread(col('ttft_p50_s'), digits=3)} | "
                  f"{spread(col('ttft_p99_s'), digits=3)} | {spread(col('generated_tokens'), digits=0)} | "
                  f"{sum(col('failed'))} |")
    if all(results.get(n) for n in ("ferrox", "llama-server")):
        f, l = results["ferrox"], results["llama-server"]
        print("\n| clients | ferrox / llama-server tok/s | TTFT p99 ferrox / llama-server |")
        print("|--------:|----------------------------:|-------------------------------:|")
        for c in a.clients:
            tf, tl = median_of(f, c, "tokens_per_s"), median_of(l, c, "tokens_per_s")
            pf, pl = median_of(f, c, "ttft_p99_s"), median_of(l, c, "ttft_p99_s")
            ratio = f"{tf / tl:.2f}" if tf and tl else "-"
            ttft = f"{pf / pl:.2f}" if pf and pl else "-"
            print(f"| {c} | {ratio} | {ttft} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    ap.add_argument("--ferrox", default="build/release/bin/ferrox")
    ap.add_argument("--clients", default="1,4,16", help="comma-separated concurrency levels")
    ap.add_argument("--requests", type=int, default=2, help="requests per client")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, help="sequences per server (default: the largest --clients)")
    ap.add_argument("--ctx-per-seq", type=int, default=1024, help="KV positions per sequence")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["ferrox", "llama"], help="run one engine alone")
    ap.add_argument("--smoke", action="store_true",
                    help="CI check: ferrox alone, 1 and 4 clients, 8 tokens, 1 round")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    ap.add_argument("--start-timeout", type=float, default=120.0)
    ap.add_argument("--stop-timeout", type=float, default=60.0)
    ap.add_argument("--json", help="write every round's summaries to this file")
    a = ap.parse_args()
    if a.smoke:
        a.only, a.clients, a.requests, a.max_tokens, a.rounds = "ferrox", "1,4", 2, 8, 1
        a.parallel = a.parallel or 4
        a.ctx_per_seq = min(a.ctx_per_seq, 512)
    a.clients = [int(x) for x in a.clients.split(",")]
    a.parallel = a.parallel or max(a.clients)
    if not a.model.is_file():
        sys.exit(f"no model file {a.model}")
    if a.only != "llama" and not os.access(a.ferrox, os.X_OK):
        sys.exit(f"no ferrox executable at {a.ferrox} (--ferrox)")
    engines = {"ferrox": ["ferrox"], "llama": ["llama-server"]}.get(a.only, ["llama-server", "ferrox"])
    results: dict[str, list[dict]] = {n: [] for n in engines}
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        logdir = pathlib.Path(tmp)
        for r in range(a.rounds):
            order = engines if r % 2 == 0 else engines[::-1]
            for name in order:
                print(f"round {r + 1}/{a.rounds}: {name}", file=sys.stderr)
                try:
                    results[name].append(run_round(name, a, logdir, problems))
                except RuntimeError as e:  # a server that does not start ends the run
                    problems.append(str(e))
                    break
            else:
                continue
            break
    print_tables(a, results)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(
            {"args": {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(a).items()},
             "rounds": results}, indent=2))
    if problems:
        print(f"\n{len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
