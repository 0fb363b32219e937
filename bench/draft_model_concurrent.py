#!/usr/bin/env python3
"""A draft model under concurrency: `ferrox serve --model-draft` with N streaming clients at
once, each a greedy chat answer, plain (`speculative.n_max` 0) and drafting (`n_max` k), for
one or more ferrox binaries in the same run -- e.g. the build before and after a change to
how the draft model's proposals are decoded (docs/speculation.md, "A draft model").

A round sends the N requests together and times them from the first send to the last
answer's end: aggregate tokens/s = the completion tokens of all N / that time (prefill
included: the prompts are short). Rounds alternate the order of binaries and
configurations; one server runs at a time. Table: per binary and configuration, median
[min-max] over rounds of aggregate tokens/s, the ratio to the same binary's plain rounds,
and accepted / drafted draft tokens (usage). Every answer must equal the plain one of its
prompt (the exit status says).

Usage: bench/draft_model_concurrent.py --ferrox after=build/ci/bin/ferrox
       [--ferrox before=/tmp/base/build/ci/bin/ferrox] [--model M.gguf] [--draft D.gguf]
       [--clients 8] [--n-max 1 --n-max 2] [--rounds 3] [--max-tokens 64] [--threads 2]
"""
import argparse
import concurrent.futures
import json
import pathlib
import statistics
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from serve_vs_llama_server import Server, free_port  # noqa: E402

DEFAULT_MODEL = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"

TOPICS = ["the sea", "a clock", "winter", "a library", "bread", "a bridge", "the moon", "a garden",
          "trains", "music", "a river", "snow", "paper", "a lamp", "bees", "salt"]


def stream_chat(base: str, prompt: str, max_tokens: int, n_max: int) -> dict:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
            "speculative": {"n_max": n_max}}
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    usage, text = {}, ""
    with urllib.request.urlopen(req, timeout=900) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            if d.get("usage"):
                usage = d["usage"]
            for c in d.get("choices", []):
                text += c.get("delta", {}).get("content") or ""
    details = usage.get("completion_tokens_details") or {}
    accepted = details.get("accepted_prediction_tokens", 0)
    return {"tokens": usage.get("completion_tokens", 0), "text": text, "accepted": accepted,
            "drafted": accepted + details.get("rejected_prediction_tokens", 0)}


def one_round(base: str, prompts: list[str], max_tokens: int, n_max: int) -> dict:
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        answers = list(pool.map(lambda p: stream_chat(base, p, max_tokens, n_max), prompts))
    wall = time.perf_counter() - start
    tokens = sum(a["tokens"] for a in answers)
    return {"tps": tokens / wall, "answers": answers}


def spread(values):
    return f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ferrox", action="append", required=True, help="LABEL=PATH; repeatable")
    p.add_argument("--model", default=str(DEFAULT_MODEL))
    p.add_argument("--draft", default=None, help="the draft model (default: the model itself)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--n-max", type=int, action="append", default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    binaries = dict(b.split("=", 1) for b in a.ferrox)
    configs = [0] + (a.n_max or [1, 2])
    prompts = [f"Write three sentences about {TOPICS[i % len(TOPICS)]}." for i in range(a.clients)]
    logdir = pathlib.Path(tempfile.mkdtemp(prefix="draft-bench-"))
    results: dict[tuple[str, int], list[dict]] = {}
    for rnd in range(a.rounds):
        order = list(binaries) if rnd % 2 == 0 else list(reversed(binaries))
        for label in order:
            port = free_port()
            cmd = [binaries[label], "serve", "-m", a.model, "--model-draft", a.draft or a.model,
                   "--port", str(port), "--parallel", str(a.clients), "-c", "4096",
                   "-t", str(a.threads)]
            server = Server(label, cmd, port, "/ready", logdir)
            server.start(180)
            try:
                base = f"http://127.0.0.1:{port}"
                stream_chat(base, "Say hi.", 4, 0)  # warm-up
                for n_max in (configs if rnd % 2 == 0 else list(reversed(configs))):
                    r = one_round(base, prompts, a.max_tokens, n_max)
                    results.setdefault((label, n_max), []).append(r)
                    print(f"round {rnd} {label} n_max {n_max}: {r['tps']:.1f} tok/s", flush=True)
            finally:
                server.stop()
    print(f"\nmodel {a.model}, draft {a.draft or 'the model itself'}, {a.threads} threads, "
          f"{a.clients} streaming clients at once, {a.rounds} rounds, max_tokens {a.max_tokens}; "
          f"aggregate tok/s median [min-max]")
    print(f"{'binary':12} {'n_max':>5} {'tok/s':>22} {'x plain':>8} {'accepted/drafted':>18}")
    for (label, n_max), rs in results.items():
        med = statistics.median(r["tps"] for r in rs)
        plain = statistics.median(r["tps"] for r in results[(label, 0)])
        drafted = sum(x["drafted"] for r in rs for x in r["answers"])
        accepted = sum(x["accepted"] for r in rs for x in r["answers"])
        rate = f"{accepted}/{drafted}" if drafted else "-"
        print(f"{label:12} {n_max:5} {spread([r['tps'] for r in rs]):>22} {med / plain:8.2f} "
              f"{rate:>18}")
    want = [x["text"] for x in results[(next(iter(binaries)), 0)][0]["answers"]]
    same = all([x["text"] for x in r["answers"]] == want for rs in results.values() for r in rs)
    print(f"every answer equals the plain one of its prompt: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
