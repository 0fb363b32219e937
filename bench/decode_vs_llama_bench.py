#!/usr/bin/env python3
"""ferrox against llama.cpp's own `llama-bench` on one GGUF file: decode and prefill.

llama-bench is built from the llama-cpp-python sdist that CI caches (bench/llama_build.py,
into ~/.cache/ferrox/llama.cpp-<version>; never committed). For --runs rounds and each
thread count, the engines run alternately (who goes first alternates too), so drift on a
shared machine hits both alike:

  decode   llama-bench -p 0 -n N (its "tg N")   vs  `ferrox run -n N+1 --json` eval tok/s
  prefill  llama-bench -p P -n 0 (its "pp P")   vs  `ferrox run` on a P-token prompt

Both keep an f16 KV cache (llama-bench's default; ferrox --kv-type f16) and greedy-decode.
The tables give medians with min-max spreads and the ratio ferrox / llama.cpp (> 1: ferrox
faster). Without --model, the file of --layout (a bench/shaped_header.py layout; default
qwen2-7b-q4_k_m, Qwen2-7B's shapes in Q4_K_M; qwen35-4b-q4_k_m and
qwen35moe-a3b-e64-q4_k_m for the hybrid recurrent models) is made once in
~/.cache/ferrox/models from its header and `ferrox_synth_gguf fill`: random valid
weights, the speed of the real file.

    python3 bench/decode_vs_llama_bench.py [--model M.gguf | --layout NAME] [--threads 1,2]
        [--runs 3] [--n-gen 32] [--n-prompt 128] [--ferrox BIN] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from llama_build import CACHE, build_llama_tool  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
from shaped_header import LAYOUTS  # noqa: E402


def build_bin(name: str) -> pathlib.Path:
    for preset in ("release", "ci"):
        p = ROOT / "build" / preset / "bin" / name
        if p.exists():
            return p
    sys.exit(f"no build/*/bin/{name}: build ferrox first (cmake --preset release)")


def synthesized_model(layout: str) -> pathlib.Path:
    models = CACHE / "models"
    out = models / f"{layout}.gguf"
    if out.exists():
        return out
    models.mkdir(parents=True, exist_ok=True)
    header = models / f"{layout}.header"
    subprocess.run([sys.executable, str(ROOT / "bench/shaped_header.py"), layout, str(header)], check=True)
    partial = out.with_suffix(".partial")
    subprocess.run([str(build_bin("ferrox_synth_gguf")), "fill", str(header), str(partial)], check=True)
    partial.rename(out)  # a half-written file is never taken for a whole one
    return out


def prompt_of(model: pathlib.Path, n_tokens: int) -> str:
    """Text that llama.cpp's tokenizer makes exactly n_tokens long (BOS, if any, included)."""
    import llama_cpp
    vocab = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
    words = "the quick brown fox jumps over a lazy dog while seven wizards judge boxing".split()
    text, i = "", 0
    while True:
        candidate = (text + " " + words[i % len(words)]).strip()
        if len(vocab.tokenize(candidate.encode(), add_bos=True)) > n_tokens:
            return text
        text, i = candidate, i + 1


def llama_bench(exe: pathlib.Path, model: pathlib.Path, threads: int, n_prompt: int, n_gen: int) -> float:
    out = subprocess.run([str(exe), "-m", str(model), "-t", str(threads), "-p", str(n_prompt),
                          "-n", str(n_gen), "-r", "1", "-o", "json"],
                         capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout)[0]["avg_ts"])


def ferrox_run(exe: pathlib.Path, model: pathlib.Path, threads: int, prompt: str, n_gen: int) -> dict:
    out = subprocess.run([str(exe), "run", "-m", str(model), "-t", str(threads), "-p", prompt,
                          "-n", str(n_gen), "--temp", "0", "--kv-type", "f16", "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ferrox run failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=pathlib.Path)
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="qwen2-7b-q4_k_m",
                    help="the shaped file to make and use when --model is not given")
    ap.add_argument("--ferrox", type=pathlib.Path)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n-gen", type=int, default=32)
    ap.add_argument("--n-prompt", type=int, default=128)
    ap.add_argument("--json", type=pathlib.Path)
    args = ap.parse_args()
    model = args.model or synthesized_model(args.layout)
    ferrox = args.ferrox or build_bin("ferrox")
    llama = build_llama_tool("llama-bench")
    threads = [int(t) for t in args.threads.split(",")]
    short = "Once upon a time"
    long_prompt = prompt_of(model, args.n_prompt)

    results: dict = {}
    load_before = os.getloadavg()
    for r in range(args.runs):
        for t in threads:
            row = results.setdefault(t, {"llama_tg": [], "ferrox_tg": [], "llama_pp": [], "ferrox_pp": []})
            order = ["llama", "ferrox"] if r % 2 == 0 else ["ferrox", "llama"]
            for engine in order:
                if engine == "llama":
                    row["llama_tg"].append(llama_bench(llama, model, t, 0, args.n_gen))
                    row["llama_pp"].append(llama_bench(llama, model, t, args.n_prompt, 0))
                else:
                    # n_gen + 1: ferrox's first token comes from the prompt pass.
                    row["ferrox_tg"].append(ferrox_run(ferrox, model, t, short, args.n_gen + 1)["eval_tokens_per_s"])
                    doc = ferrox_run(ferrox, model, t, long_prompt, 1)
                    if doc["prompt_tokens"] != args.n_prompt:
                        sys.exit(f"ferrox's tokenizer gives {doc['prompt_tokens']} prompt tokens, "
                                 f"llama.cpp's {args.n_prompt}")
                    row["ferrox_pp"].append(doc["prompt_tokens_per_s"])
            print(f"run {r + 1}/{args.runs}, {t} thread(s): tg llama {row['llama_tg'][-1]:.2f} "
                  f"ferrox {row['ferrox_tg'][-1]:.2f}; pp llama {row['llama_pp'][-1]:.1f} "
                  f"ferrox {row['ferrox_pp'][-1]:.1f}", file=sys.stderr)
    load_after = os.getloadavg()

    doc = {"model": str(model), "n_gen": args.n_gen, "n_prompt": args.n_prompt, "runs": args.runs,
           "loadavg_before": load_before, "loadavg_after": load_after, "threads": {}}
    print(f"{model.name}; medians of {args.runs} (min-max); load average {load_before[0]:.2f} "
          f"before, {load_after[0]:.2f} after\n")
    print(f"| threads | test | llama.cpp tok/s | ferrox tok/s | ferrox / llama.cpp |")
    print(f"|---:|---|---:|---:|---:|")
    for t, row in results.items():
        entry = {k: summary(v) for k, v in row.items()}
        doc["threads"][t] = entry
        for test, label in (("tg", f"tg {args.n_gen}"), ("pp", f"pp {args.n_prompt}")):
            la, fe = entry[f"llama_{test}"], entry[f"ferrox_{test}"]
            ratio = fe["median"] / la["median"]
            entry[f"ratio_{test}"] = ratio
            print(f"| {t} | {label} | {la['median']:.2f} ({la['min']:.2f}-{la['max']:.2f}) | "
                  f"{fe['median']:.2f} ({fe['min']:.2f}-{fe['max']:.2f}) | {ratio:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
