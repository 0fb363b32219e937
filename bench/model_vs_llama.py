#!/usr/bin/env python3
"""ferrox against llama.cpp on one GGUF model, same machine, same run, same threads.

For each engine: prompt-processing tokens/s on a PROMPT_TOKENS-token prompt and decode
tokens/s over EVAL_TOKENS greedy tokens, repeated --reps times, alternating engines so
that machine noise hits both alike. Prints medians, p10-p90 spreads and the ratios
ferrox / llama.cpp (> 1 means ferrox is faster).

    python3 bench/model_vs_llama.py [--model PATH] [--threads 1,2] [--reps 5]

llama.cpp comes from the llama-cpp-python package (ci/llama_cpp.sh installs it); its decode
loop runs through Python (sample + eval per token), a few tens of microseconds a token.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_MODEL = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"


def prompt_of(llm, n_tokens: int) -> tuple[str, list[int]]:
    """A natural-language prompt that tokenizes to exactly n_tokens (BOS included)."""
    words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly "
             "judge boxing matches in the old town square ").split()
    text, i = "", 0
    while True:
        candidate = (text + " " + words[i % len(words)]).strip()
        tokens = llm.tokenize(candidate.encode(), add_bos=True)
        if len(tokens) > n_tokens:
            return text, llm.tokenize(text.encode(), add_bos=True)
        text, i = candidate, i + 1


def llama_once(llm, prompt_tokens: list[int], eval_tokens: int) -> tuple[float, float]:
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt_tokens)
    t1 = time.perf_counter()
    for _ in range(eval_tokens):
        token = llm.sample(temp=0.0, top_k=1)
        llm.eval([token])
    t2 = time.perf_counter()
    return len(prompt_tokens) / (t1 - t0), eval_tokens / (t2 - t1)


def ferrox_once(ferrox: pathlib.Path, model: pathlib.Path, prompt: str, eval_tokens: int,
                threads: int) -> tuple[float, float]:
    out = subprocess.run([str(ferrox), "run", "-m", str(model), "-p", prompt, "-n", str(eval_tokens),
                          "--temp", "0", "-t", str(threads), "-c", "1024", "--json"],
                         check=True, capture_output=True, text=True)
    doc = json.loads(out.stdout)
    return doc["prompt_tokens_per_s"], doc["eval_tokens_per_s"]


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    lo = ordered[int(0.1 * (len(ordered) - 1) + 0.5)]
    hi = ordered[int(0.9 * (len(ordered) - 1) + 0.5)]
    return f"{statistics.median(values):.1f} [{lo:.1f}-{hi:.1f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    ap.add_argument("--ferrox", type=pathlib.Path, default=ROOT / "build/release/bin/ferrox")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--eval-tokens", type=int, default=128)
    args = ap.parse_args()
    import llama_cpp

    print(f"model {args.model.name}; prompt {args.prompt_tokens} tokens, eval {args.eval_tokens}; "
          f"{args.reps} alternating reps; tokens/s median [p10-p90]\n")
    print("| threads | engine | prompt tok/s | eval tok/s |")
    print("|---:|---|---:|---:|")
    ratios = []
    for threads in [int(t) for t in args.threads.split(",")]:
        llm = llama_cpp.Llama(model_path=str(args.model), n_ctx=1024, n_batch=512, n_threads=threads,
                              n_threads_batch=threads, verbose=False)
        prompt, tokens = prompt_of(llm, args.prompt_tokens)
        ours, theirs = [], []
        for _ in range(args.reps):
            ours.append(ferrox_once(args.ferrox, args.model, prompt, args.eval_tokens, threads))
            theirs.append(llama_once(llm, tokens, args.eval_tokens))
        del llm
        for name, runs in (("ferrox", ours), ("llama.cpp", theirs)):
            print(f"| {threads} | {name} | {spread([r[0] for r in runs])} | {spread([r[1] for r in runs])} |")
        ratios.append((threads,
                       statistics.median(r[0] for r in ours) / statistics.median(r[0] for r in theirs),
                       statistics.median(r[1] for r in ours) / statistics.median(r[1] for r in theirs)))
    print("\n| threads | prompt ratio ferrox/llama.cpp | eval ratio ferrox/llama.cpp |")
    print("|---:|---:|---:|")
    for threads, p, e in ratios:
        print(f"| {threads} | {p:.2f} | {e:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
