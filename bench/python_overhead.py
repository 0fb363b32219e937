#!/usr/bin/env python3
"""What the Python binding costs: Model.generate against `ferrox run` and llama-cpp-python.

Three ways to generate the same greedy continuation of the same prompt, same model,
threads, context and KV kind, alternating per round so that machine noise hits all alike:

  ferrox run       the CLI's own decode rate (`--json` eval_tokens_per_s: decode steps
                   over the time from the prompt's logits to the end; load excluded);
  Model.generate   the ferrox package in this process, measured from the caller's side:
                   stream=True, tokens after the first piece over the time from the first
                   piece to the last (the Python loop, ctypes calls and detokenizing
                   included); also its Completion.tokens_per_second (the CLI's definition);
  llama-cpp-python Llama.create_completion(stream=True), measured as Model.generate is.

Reports medians with min-max spreads and the ratios Model.generate / ferrox run (issue 39's
target: within 3%) and Model.generate / create_completion (target: >= 1.2x).

    python3 bench/python_overhead.py [--model PATH] [--threads 2] [--runs 5]
                                     [--eval-tokens 128] [--smoke] [--json]

The ferrox package is imported as installed, else from python/ with $FERROX_LIBRARY or the
newest build/*/lib/libferrox_core.so. --smoke: 2 runs of 16 tokens (a check that it works,
not a measurement). Benchmarks on a shared machine are noisy: the load average is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_MODEL = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"
PROMPT = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxing "
          "matches in the old town square, and")
KV_TYPES = {"f32": 0, "f16": 1}  # ferrox name: GGML_TYPE_*


def newest_build() -> pathlib.Path | None:
    found = sorted(ROOT.glob("build/*/lib/libferrox_core.so"), key=lambda p: p.stat().st_mtime)
    return found[-1].parent.parent if found else None


def import_ferrox():
    try:
        import ferrox  # the installed wheel
        return ferrox
    except ImportError:
        pass
    build = newest_build()
    if "FERROX_LIBRARY" not in os.environ and build is not None:
        os.environ["FERROX_LIBRARY"] = str(build / "lib/libferrox_core.so")
    sys.path.insert(0, str(ROOT / "python"))
    import ferrox
    return ferrox


def streamed_rate(pieces) -> tuple[float, int]:
    """Tokens/s after the first piece, and the pieces counted (one per token)."""
    first = last = None
    n = 0
    for _ in pieces:
        now = time.perf_counter()
        first = now if first is None else first
        last = now
        n += 1
    if n < 2:
        return 0.0, n
    return (n - 1) / (last - first), n


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def fmt(s: dict) -> str:
    return f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    ap.add_argument("--ferrox", type=pathlib.Path, default=None,
                    help="the CLI (default: bin/ferrox of the newest build)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--eval-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--kv-type", choices=sorted(KV_TYPES), default="f16")
    ap.add_argument("--smoke", action="store_true", help="2 runs of 16 tokens")
    ap.add_argument("--no-llama", action="store_true", help="leave llama-cpp-python out")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.eval_tokens = 2, 16
    ferrox = import_ferrox()
    cli = args.ferrox or (newest_build() or ROOT / "build/ci") / "bin/ferrox"
    env = dict(os.environ)
    build_plugins = cli.resolve().parent.parent / "lib/ferrox/plugins"
    if build_plugins.is_dir():
        env["FERROX_PLUGIN_PATH"] = str(build_plugins)
    cmd = [str(cli), "--log-level", "warn", "run", "-m", str(args.model), "-p", PROMPT, "-n",
           str(args.eval_tokens), "--temp", "0", "-t", str(args.threads), "-c", str(args.ctx),
           "--kv-type", args.kv_type, "--json"]
    llm = None
    if not args.no_llama:
        import llama_cpp

        kv = KV_TYPES[args.kv_type]
        llm = llama_cpp.Llama(model_path=str(args.model), n_ctx=args.ctx, n_threads=args.threads,
                              n_threads_batch=args.threads, type_k=kv, type_v=kv, verbose=False)
    model = ferrox.Model(args.model, n_threads=args.threads, n_ctx=args.ctx, kv_type=args.kv_type)
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {"ferrox run": [], "Model.generate": [],
                                     "Model.generate (Completion)": []}
    if llm is not None:
        rates["create_completion"] = []
    counts: dict[str, list[int]] = {k: [] for k in rates}
    for _ in range(args.runs):
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")
        doc = json.loads(done.stdout)
        rates["ferrox run"].append(doc["eval_tokens_per_s"])
        counts["ferrox run"].append(doc["generated_tokens"])

        stream = model.generate(PROMPT, max_tokens=args.eval_tokens, temperature=0, stream=True)
        rate, _ = streamed_rate(stream)
        rates["Model.generate"].append(rate)
        counts["Model.generate"].append(len(stream.completion.tokens))
        whole = model.generate(PROMPT, max_tokens=args.eval_tokens, temperature=0)
        rates["Model.generate (Completion)"].append(whole.tokens_per_second)
        counts["Model.generate (Completion)"].append(len(whole.tokens))

        if llm is not None:
            llm.reset()
            chunks = llm.create_completion(PROMPT, max_tokens=args.eval_tokens, temperature=0,
                                           stream=True)
            rate, n = streamed_rate(chunks)
            rates["create_completion"].append(rate)
            counts["create_completion"].append(n)
    load_after = os.getloadavg()
    model.close()
    result = {
        "model": str(args.model), "threads": args.threads, "runs": args.runs,
        "eval_tokens": args.eval_tokens, "ctx": args.ctx, "kv_type": args.kv_type,
        "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load_after,
        "tokens_per_s": {k: summary(v) for k, v in rates.items()},
        "tokens_generated": counts,
    }
    med = {k: v["median"] for k, v in result["tokens_per_s"].items()}
    result["ratios"] = {"Model.generate / ferrox run": med["Model.generate"] / med["ferrox run"]}
    if llm is not None:
        result["ratios"]["Model.generate / create_completion"] = (
            med["Model.generate"] / med["create_completion"])
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"model {args.model.name}; greedy, {args.eval_tokens} tokens, {args.threads} threads, ctx "
          f"{args.ctx}, {args.kv_type} KV; {args.runs} alternating rounds; decode tokens/s median "
          f"(min-max); {os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after\n")
    print("| engine | tokens/s | tokens generated |")
    print("|---|---:|---|")
    for name, s in result["tokens_per_s"].items():
        print(f"| {name} | {fmt(s)} | {sorted(set(counts[name]))} |")
    print()
    for name, ratio in result["ratios"].items():
        print(f"{name}: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
