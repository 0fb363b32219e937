#!/usr/bin/env python3
"""An append-only chat replayed against `ferrox serve` and llama.cpp's `llama-server`:
the prompt tokens each re-processes per turn (issue 35 item 3).

Each request resends the whole history plus a new user message, as OpenAI clients do,
greedy, same messages for both engines (random words, 10 to 150 per message, seeded, so
turns cross 128-token chunk boundaries at various points). One server at a time, the same
model, threads, sequences, context and chat template. Per turn the table shows the
prompt's tokens and how many each engine computed:
- ferrox: usage.prompt_tokens - usage.prompt_tokens_details.cached_tokens;
- llama-server: timings.prompt_n (computed) beside timings.cache_n (reused).
On a hybrid recurrent model (qwen35) ferrox resumes from recurrent-state checkpoints
(docs/models.md, "Sequence state and checkpoints"): at the previous prompt's end, so
that a turn computes only its new tokens, wherever that is exact (server/prefill_plan.h);
elsewhere from the last chunk end before it (under 128 more).

llama-server is built from the llama-cpp-python sdist that CI caches (bench/llama_build.py,
into ~/.cache/ferrox/llama.cpp-<version>; once, 10-20 minutes on 2 cores). Run by hand,
not in CI.

Usage: bench/chat_replay_vs_llama_server.py [--model tiny-qwen35.gguf]
       [--ferrox build/ci/bin/ferrox] [--template Qwen-Qwen3-0.6B.jinja] [--turns 8]
       [--seed 1] [--max-tokens 24] [--threads 2] [--ctx 8192] [--edit] [--only ferrox|llama]
       [--llama-args "..."] [--json out.json]
A tiny model (tiny-*.gguf, 256 training positions) is copied with its context_length
set to --ctx first, and both engines read the copy.
"""
import argparse
import json
import os
import pathlib
import random
import sys
import tempfile
import urllib.request

from llama_build import build_llama_tool
from serve_vs_llama_server import Server, free_port

HOME = pathlib.Path.home()
WORDS = ("river stone lantern copper window garden signal harbor meadow orbit "
         "velvet pencil thunder silver market candle forest ladder engine violet").split()


def messages(seed: int, turns: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 150))) for _ in range(turns)]


def stretched(model: pathlib.Path, positions: int, folder: pathlib.Path) -> pathlib.Path:
    """A copy of `model` whose training context says `positions` (tiny models say 256,
    too short for the chat; both engines then read the same copy)."""
    import shutil

    import gguf
    path = folder / model.name
    shutil.copy(model, path)
    reader = gguf.GGUFReader(path, "r+")
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    reader.fields[f"{arch}.context_length"].parts[-1][0] = positions
    del reader  # flushes the memory map
    return path


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def replay(server: Server, a, engine: str) -> list[dict]:
    """Per turn: prompt tokens, computed, reused, answer."""
    history, rows = [], []
    for text in messages(a.seed, a.turns):
        history.append({"role": "user", "content": text})
        r = post(server.base_url + "/chat/completions",
                 {"model": "m", "messages": history, "max_tokens": a.max_tokens, "temperature": 0,
                  "seed": 7, "cache_prompt": True} if engine == "llama-server" else
                 {"model": "m", "messages": history, "max_tokens": a.max_tokens, "temperature": 0,
                  "seed": 7})
        answer = r["choices"][0]["message"].get("content") or ""
        # --edit: the answer goes back changed at its end (as a client that trims it, or a
        # template that drops a reasoning part, sends it), so the cache must be rolled
        # back into the answer rather than only extended.
        sent = answer[: len(answer) * 2 // 3] if a.edit else answer
        history.append({"role": "assistant", "content": sent})
        usage = r.get("usage", {})
        if engine == "llama-server":
            t = r.get("timings", {})
            computed, reused = t.get("prompt_n"), t.get("cache_n")
        else:
            reused = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            computed = usage["prompt_tokens"] - reused
        rows.append({"prompt": usage.get("prompt_tokens"), "computed": computed, "reused": reused,
                     "answer": answer})
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=pathlib.Path, default=pathlib.Path(
        os.environ.get("FERROX_TINY_MODELS", HOME / ".cache/ferrox/tiny-models")) / "tiny-qwen35.gguf")
    p.add_argument("--ferrox", default="build/ci/bin/ferrox")
    p.add_argument("--template", type=pathlib.Path,
                   default=HOME / ".cache/ferrox/templates/Qwen-Qwen3-0.6B.jinja")
    p.add_argument("--turns", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=8192)
    p.add_argument("--edit", action="store_true",
                   help="resend each answer cut to its first two thirds (a rollback into the cache)")
    p.add_argument("--only", choices=("ferrox", "llama"))
    p.add_argument("--llama-args", default="", help="more llama-server flags, space-separated")
    p.add_argument("--json", type=pathlib.Path)
    a = p.parse_args()
    logdir = pathlib.Path(tempfile.mkdtemp(prefix="chat-replay-"))
    if a.model.name.startswith("tiny-"):
        a.model = stretched(a.model, a.ctx, logdir)
    cmds = {
        "ferrox": lambda port: [a.ferrox, "serve", "-m", str(a.model), "--host", "127.0.0.1",
                                "--port", str(port), "--parallel", "1", "-c", str(a.ctx),
                                "-t", str(a.threads), "--chat-template", str(a.template)],
        "llama-server": lambda port: [str(build_llama_tool("llama-server")), "-m", str(a.model),
                                      "--host", "127.0.0.1", "--port", str(port), "-np", "1",
                                      "-c", str(a.ctx), "-t", str(a.threads), "-tb", str(a.threads),
                                      "--jinja", "--chat-template-file", str(a.template),
                                      *a.llama_args.split()],
    }
    ready = {"ferrox": "/ready", "llama-server": "/health"}
    engines = {"ferrox": ["ferrox"], "llama": ["llama-server"]}.get(a.only, ["ferrox", "llama-server"])
    results, failed = {}, False
    for name in engines:
        port = free_port()
        server = Server(name, cmds[name](port), port, ready[name], logdir)
        try:
            server.start(timeout=120)
            results[name] = replay(server, a, name)
        except Exception as e:  # noqa: BLE001 -- reported verbatim, the other engine still runs
            print(f"{name} failed: {e}\n{server.log_tail()}", file=sys.stderr)
            failed = True
        finally:
            server.stop()
    print(f"\n{a.model.name}, {a.turns} turns, seed {a.seed}{', answers resent cut' if a.edit else ''}: "
          "prompt tokens computed per turn")
    print("| turn | prompt tokens | new | ferrox computed (cached) | llama-server computed (cached) |")
    print("|---:|---:|---:|---:|---:|")
    base = next(iter(results.values()), [])
    for i in range(len(base)):
        prompt = base[i]["prompt"]
        new = prompt - base[i - 1]["prompt"] if i else prompt
        cells = []
        for name in ("ferrox", "llama-server"):
            r = results.get(name)
            cells.append(f"{r[i]['computed']} ({r[i]['reused']})" if r and i < len(r) else "-")
        print(f"| {i + 1} | {prompt} | {new} | {cells[0]} | {cells[1]} |")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    print(f"logs in {logdir}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
