#!/usr/bin/env python3
"""Embeddings throughput, ferrox serve vs llama-server --embeddings, in one run
(issue 38 item 3). A program, not a test.

    python3 bench/embeddings_vs_llama.py [--model FILE] [--clients 8] [--requests 64] [--words 24]

Both servers get the same GGUF (default: the tiny qwen3 embedding model,
tests/model/embedding_models.py, made in a temporary folder), the same threads
and 8 sequences; `--clients` threads each send requests of one input of
`--words` random words to /v1/embeddings (floats) until `--requests` are done.
Prints inputs/s for each and the ratio, and the worst cosine between the two
servers' vectors of the same inputs. llama-server is $LLAMA_SERVER, else the
build bash ci/llama_cpp.sh leaves under ~/.cache/ferrox/llama.cpp-*/build-no-amx/bin.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/model"))
from embedding_models import make_embedding_model  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, body: dict) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def wait_ready(port: int, proc: subprocess.Popen, path: str) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"server exited {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("server did not become ready")


def run_load(port: int, texts: list[str], clients: int) -> float:
    post(port, {"input": texts[0]})  # warm
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda t: post(port, {"input": t}), texts))
    return len(texts) / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--words", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    llama = next(iter(sorted(pathlib.Path.home().glob(".cache/ferrox/llama.cpp-*/build-no-amx/bin/llama-server"))), None)
    ferrox = REPO / "build/ci/bin/ferrox"
    tmp = pathlib.Path(tempfile.mkdtemp())
    model = pathlib.Path(a.model) if a.model else make_embedding_model(tmp, "last")
    rng = np.random.default_rng(1)
    words = "river stone quiet lamp orbit velvet cedar ember harbor lantern meadow copper".split()
    texts = [" ".join(rng.choice(words, a.words)) for _ in range(a.requests)]
    results, vectors = {}, {}
    for name in ("ferrox", "llama-server"):
        port = free_port()
        if name == "ferrox":
            cmd = [str(ferrox), "serve", "-m", str(model), "--port", str(port), "-t", str(a.threads),
                   "--parallel", "8", "-c", "4096"]
        else:
            cmd = [str(llama), "-m", str(model), "--port", str(port), "-t", str(a.threads), "--embeddings",
                   "-np", "8", "-c", "4096", "-ub", "512", "-b", "512"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # ferrox answers /health while loading; /ready is its readiness (llama-server: /health).
            wait_ready(port, proc, "/ready" if name == "ferrox" else "/health")
            results[name] = run_load(port, texts, a.clients)
            vectors[name] = np.array([d["embedding"] for d in post(port, {"input": texts[:8]})["data"]])
        finally:
            proc.terminate()
            proc.wait(30)
    cos = (vectors["ferrox"] * vectors["llama-server"]).sum(1)
    print(f"model {model.name}, {a.requests} requests of {a.words} words, {a.clients} clients, -t {a.threads}")
    for name, rate in results.items():
        print(f"  {name:13s} {rate:8.1f} inputs/s")
    print(f"  ratio ferrox / llama-server: {results['ferrox'] / results['llama-server']:.2f}x; "
          f"worst cosine between them {cos.min():.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
