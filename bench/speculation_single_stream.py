#!/usr/bin/env python3
"""N-gram speculation, single stream: `ferrox serve` with and without drafts (the same
server, the request's `speculative.n_max`), and llama-server without and with its
draftless n-gram mode, on prompts whose answer quotes the input (docs/speculation.md).

Each request is a streamed greedy chat answer; its decode speed is (tokens - 1) / (time of
the last content chunk - time of the first), so prefill is left out and both engines are
timed the same way. Rounds alternate the order of the configurations. One server runs at
a time. Tables: per configuration, median [min-max] over rounds x prompts of decode
tokens/s, the speed-up over the same engine's plain decode, and the acceptance rate
(accepted / drafted draft tokens: ferrox's usage, llama-server's timings).

Usage: bench/speculation_single_stream.py [--model M.gguf] [--ferrox build/ci/bin/ferrox]
       [--rounds 3] [--max-tokens 96] [--n-max 8] [--threads 2] [--only ferrox|llama]
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from serve_vs_llama_server import Server, free_port  # noqa: E402
from llama_build import build_llama_tool  # noqa: E402

DEFAULT_MODEL = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"

PROMPTS = [
    "Repeat the following text exactly, word for word:\n\n"
    "The committee met on Tuesday to review the budget for the coming year. After a long "
    "discussion, the members agreed to increase funding for the library, to repair the roof "
    "of the town hall, and to hire two more teachers for the primary school.",
    "Fix the typo in this code and print the whole corrected function:\n\n"
    "def total_price(items, tax_rate):\n    subtotal = 0\n    for item in items:\n"
    "        subtotal += item.price * item.quantity\n    tax = subtotl * tax_rate\n"
    "    return subtotal + tax\n",
]


def stream_chat(base: str, prompt: str, max_tokens: int, extra: dict) -> dict:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, **extra}
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    first = last = None
    chunks = 0
    usage, timings, text = {}, {}, ""
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            if d.get("usage"):
                usage = d["usage"]
            if d.get("timings"):
                timings = d["timings"]
            for c in d.get("choices", []):
                piece = c.get("delta", {}).get("content")
                if piece:
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    chunks += 1
                    text += piece
    n = usage.get("completion_tokens", 0)
    details = usage.get("completion_tokens_details") or {}
    drafted = details.get("accepted_prediction_tokens", 0) + details.get("rejected_prediction_tokens", 0)
    accepted = details.get("accepted_prediction_tokens", 0)
    if timings.get("draft_n"):
        drafted, accepted = timings["draft_n"], timings.get("draft_n_accepted", 0)
    tps = (n - 1) / (last - first) if first and last and last > first and n > 1 else None
    return {"tokens": n, "tps": tps, "drafted": drafted, "accepted": accepted, "text": text}


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=str(DEFAULT_MODEL))
    p.add_argument("--ferrox", default="build/ci/bin/ferrox")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--n-max", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", choices=["ferrox", "llama"])
    a = p.parse_args()
    logdir = pathlib.Path(tempfile.mkdtemp(prefix="spec-bench-"))
    engines = {}
    if a.only != "llama":
        engines["ferrox"] = (lambda port: [a.ferrox, "serve", "-m", a.model, "--port", str(port),
                                          "--parallel", "1", "-c", "4096", "-t", str(a.threads),
                                          "--kv-type", "f16"], "/ready",
                             {"plain": {"speculative": {"n_max": 0}},
                              f"ngram n_max {a.n_max}": {"speculative": {"n_max": a.n_max}}})
    if a.only != "ferrox":
        llama = str(build_llama_tool("llama-server"))
        base = lambda port: [llama, "-m", a.model, "--port", str(port), "-np", "1", "-c", "4096",  # noqa: E731
                             "-t", str(a.threads), "-tb", str(a.threads), "-ctk", "f16", "-ctv", "f16"]
        engines["llama-server"] = (base, "/health", {"plain": {}})
        engines["llama-server ngram-simple"] = (
            lambda port: base(port) + ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                                       "--spec-ngram-simple-size-m", str(a.n_max),
                                       "--spec-draft-n-max", str(a.n_max)], "/health",
            {f"ngram-simple n=3 m={a.n_max}": {}})
    results: dict[str, list[dict]] = {}
    texts: dict[tuple[str, int], set] = {}
    for rnd in range(a.rounds):
        order = list(engines) if rnd % 2 == 0 else list(reversed(engines))
        for name in order:
            cmd, ready, configs = engines[name]
            port = free_port()
            server = Server(name.replace(" ", "_"), cmd(port), port, ready, logdir)
            server.start(120)
            try:
                base_url = f"http://127.0.0.1:{port}"
                stream_chat(base_url, "Say hi.", 4, {})  # warm-up
                cfgs = list(configs.items()) if rnd % 2 == 0 else list(reversed(configs.items()))
                for label, extra in cfgs:
                    for i, prompt in enumerate(PROMPTS):
                        r = stream_chat(base_url, prompt, a.max_tokens, extra)
                        results.setdefault(f"{name}: {label}", []).append(r)
                        texts.setdefault((name.split()[0], i), set()).add(r["text"])
            finally:
                server.stop()
    print(f"model {a.model}, {a.threads} threads, {a.rounds} rounds x {len(PROMPTS)} prompts, "
          f"max_tokens {a.max_tokens}; decode tok/s median [min-max]")
    plain = {}
    for key, rs in results.items():
        med = statistics.median([r["tps"] for r in rs if r["tps"]])
        if key.endswith(": plain"):
            plain[key.split(":")[0].split()[0]] = med
    print(f"{'configuration':45} {'tok/s':>22} {'x plain':>8} {'accepted/drafted':>18}")
    for key, rs in results.items():
        med = statistics.median([r["tps"] for r in rs if r["tps"]])
        drafted = sum(r["drafted"] for r in rs)
        accepted = sum(r["accepted"] for r in rs)
        rate = f"{accepted}/{drafted} ({accepted / drafted:.0%})" if drafted else "-"
        ratio = med / plain.get(key.split(":")[0].split()[0], med)
        print(f"{key:45} {spread([r['tps'] for r in rs]):>22} {ratio:8.2f} {rate:>18}")
    same = all(len(v) == 1 for (eng, _), v in texts.items() if eng == "ferrox")
    print(f"ferrox: every configuration gave the same text per prompt: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
