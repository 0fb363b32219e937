#!/usr/bin/env python3
"""ferrox against llama.cpp on one GGUF model: same machine, same prompt, same threads.

For each thread count and engine: prompt tokens/s over a PROMPT_TOKENS-token prompt and
eval (decode) tokens/s over EVAL_TOKENS greedy tokens, repeated --runs times with the
engines alternating so that machine noise hits both alike. Reports medians with min-max
spreads, the ratios ferrox / llama.cpp (> 1: ferrox is faster), and ferrox's peak RSS
(the kernel's high-water mark, VmHWM, of each `ferrox run` process: load plus the whole
run) against the budget model file + KV cache for --ctx positions + 10%.

    python3 bench/model_vs_llama.py [--model PATH] [--ferrox BIN] [--threads 1,2] [--runs 5]
                                    [--prompt-tokens 512] [--eval-tokens 128] [--kv-type f16] [--json]

Both engines get the same text; llama.cpp's tokenizer sizes it to exactly PROMPT_TOKENS
(BOS included) and ferrox's own tokenizer must agree (checked on every run). ferrox's
figures are its own (`ferrox run --json`: prompt_tokens_per_s, eval_tokens_per_s; model
loading excluded). llama.cpp runs in this process through llama-cpp-python (flash
attention off, its default; n_batch 512); its decode loop is eval() plus an argmax in
numpy per token, a few tens of microseconds on top of the forward pass. Both engines keep
their KV cache in --kv-type (default f16, llama.cpp's default; ferrox --kv-type).
Benchmarks are noisy on shared machines: the load average is printed with the table.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_MODEL = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"
RSS_MARGIN = 0.10  # budget = model file + KV cache, plus 10%


def default_ferrox() -> pathlib.Path:
    """build/release/bin/ferrox, else the newest build/*/bin/ferrox."""
    release = ROOT / "build/release/bin/ferrox"
    if release.exists():
        return release
    found = sorted(ROOT.glob("build/*/bin/ferrox"), key=lambda p: p.stat().st_mtime, reverse=True)
    return found[0] if found else release


def prompt_of(llm, n_tokens: int) -> tuple[str, list[int]]:
    """A natural-language prompt that tokenizes to exactly n_tokens (BOS included)."""
    words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly "
             "judge boxing matches in the old town square").split()
    text, i = "", 0
    while True:
        candidate = (text + " " + words[i % len(words)]).strip()
        if len(llm.tokenize(candidate.encode(), add_bos=True)) > n_tokens:
            break
        text, i = candidate, i + 1
    tokens = llm.tokenize(text.encode(), add_bos=True)
    if len(tokens) != n_tokens:  # a word of several tokens overshot: pad with single-token words
        raise SystemExit(f"could not build a {n_tokens}-token prompt (got {len(tokens)})")
    return text, tokens


KV_TYPES = {"f32": (0, 4), "f16": (1, 2)}  # name: (GGML_TYPE_*, bytes per element)


def kv_cache_bytes(model: pathlib.Path, n_ctx: int, elem_bytes: int) -> int:
    """ferrox's KV cache: layers x ctx x kv_heads x (k_dim + v_dim) x element size, from the GGUF."""
    import gguf

    reader = gguf.GGUFReader(str(model))
    arch = reader.fields["general.architecture"].contents()

    def key(name: str, default=None):
        field = reader.fields.get(f"{arch}.{name}")
        return default if field is None else int(field.contents())

    n_embd, n_head = key("embedding_length"), key("attention.head_count")
    k_dim = key("attention.key_length", n_embd // n_head)
    v_dim = key("attention.value_length", k_dim)
    return key("block_count") * n_ctx * key("attention.head_count_kv", n_head) * (k_dim + v_dim) * elem_bytes


def llama_once(llm, prompt_tokens: list[int], eval_tokens: int) -> tuple[float, float]:
    import llama_cpp

    n_vocab = llm.n_vocab()

    def last_logits() -> np.ndarray:  # the context's own buffer, no copy
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))

    llm.reset()
    t0 = time.perf_counter()
    llm.eval(prompt_tokens)
    t1 = time.perf_counter()
    for _ in range(eval_tokens):
        llm.eval([int(np.argmax(last_logits()))])
    t2 = time.perf_counter()
    return len(prompt_tokens) / (t1 - t0), eval_tokens / (t2 - t1)


# Runs argv[2:] and writes its ru_maxrss (KiB) to argv[1]. A fresh, small interpreter does
# the fork: a child's ru_maxrss counts the RSS it inherited from the process that forked it
# (here: this one, holding llama.cpp's model and buffers), so fork from this one would
# report our size, not ferrox's.
RSS_PROBE = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def ferrox_once(cmd: list[str], n_prompt: int) -> tuple[float, float, int]:
    """One `ferrox run --json`: (prompt tok/s, eval tok/s, peak RSS bytes of that process)."""
    with tempfile.NamedTemporaryFile("r") as rss:
        out = subprocess.run([sys.executable, "-c", RSS_PROBE, rss.name] + cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
        peak_kib = int(rss.read())
    doc = json.loads(out.stdout)
    if doc["prompt_tokens"] != n_prompt:
        raise SystemExit(f"ferrox tokenized the prompt to {doc['prompt_tokens']} tokens, llama.cpp to {n_prompt}")
    return doc["prompt_tokens_per_s"], doc["eval_tokens_per_s"], peak_kib * 1024


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def fmt(s: dict) -> str:
    return f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    ap.add_argument("--ferrox", type=pathlib.Path, default=None, help="default: build/release, else newest build/*")
    ap.add_argument("--plugin-dir", type=pathlib.Path, default=None, help="passed to ferrox --plugin-dir")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--runs", type=int, default=5, help="runs per engine and thread count (default 5)")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--eval-tokens", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=1024, help="context (KV cache positions) of both engines")
    ap.add_argument("--kv-type", choices=sorted(KV_TYPES), default="f16", help="both engines' KV cache (default f16)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of markdown")
    args = ap.parse_args()
    if args.prompt_tokens + args.eval_tokens > args.ctx:
        ap.error("--ctx must hold the prompt and the generated tokens")
    ferrox = args.ferrox or default_ferrox()
    import llama_cpp

    load_before = os.getloadavg()
    model_bytes = args.model.stat().st_size
    ggml_kv_type, kv_elem_bytes = KV_TYPES[args.kv_type]
    kv_bytes = kv_cache_bytes(args.model, args.ctx, kv_elem_bytes)
    budget = (model_bytes + kv_bytes) * (1 + RSS_MARGIN)
    rows, peak_rss = [], 0
    for threads in [int(t) for t in args.threads.split(",")]:
        llm = llama_cpp.Llama(model_path=str(args.model), n_ctx=args.ctx, n_batch=512, n_threads=threads,
                              n_threads_batch=threads, type_k=ggml_kv_type, type_v=ggml_kv_type, verbose=False)
        prompt, tokens = prompt_of(llm, args.prompt_tokens)
        cmd = [str(ferrox.resolve())] + (["--plugin-dir", str(args.plugin_dir)] if args.plugin_dir else []) + [
            "run", "-m", str(args.model), "-p", prompt, "-n", str(args.eval_tokens), "--temp", "0",
            "-t", str(threads), "-c", str(args.ctx), "--kv-type", args.kv_type, "--json"]
        ours, theirs = [], []
        for _ in range(args.runs):
            p, e, rss = ferrox_once(cmd, len(tokens))
            ours.append((p, e))
            peak_rss = max(peak_rss, rss)
            theirs.append(llama_once(llm, tokens, args.eval_tokens))
        del llm
        row = {"threads": threads}
        for name, runs in (("ferrox", ours), ("llama.cpp", theirs)):
            row[name] = {"prompt_tok_s": summary([r[0] for r in runs]), "eval_tok_s": summary([r[1] for r in runs])}
        for what in ("prompt_tok_s", "eval_tok_s"):
            row[f"{what}_ratio"] = row["ferrox"][what]["median"] / row["llama.cpp"][what]["median"]
        rows.append(row)
    load_after = os.getloadavg()

    result = {
        "model": str(args.model), "ferrox": str(ferrox), "llama_cpp_python": llama_cpp.__version__,
        "prompt_tokens": args.prompt_tokens, "eval_tokens": args.eval_tokens, "ctx": args.ctx, "kv_type": args.kv_type,
        "runs": args.runs, "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load_after,
        "rows": rows,
        "memory": {"ferrox_peak_rss_bytes": peak_rss, "model_file_bytes": model_bytes, "kv_cache_bytes": kv_bytes,
                   "budget_bytes": int(budget), "within_budget": peak_rss <= budget},
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    mib = 1 << 20
    print(f"model {args.model.name}; prompt {args.prompt_tokens} tokens, eval {args.eval_tokens} tokens; "
          f"ctx {args.ctx}, {args.kv_type} KV cache in both; {args.runs} alternating runs per engine; llama-cpp-python "
          f"{llama_cpp.__version__} (flash attention off); tokens/s median (min-max); {os.cpu_count()} CPUs, load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after\n")
    print("| threads | engine | prompt tok/s | eval tok/s |")
    print("|---:|---|---:|---:|")
    for row in rows:
        for name in ("ferrox", "llama.cpp"):
            print(f"| {row['threads']} | {name} | {fmt(row[name]['prompt_tok_s'])} | {fmt(row[name]['eval_tok_s'])} |")
    print("\n| threads | prompt ferrox/llama.cpp | eval ferrox/llama.cpp |")
    print("|---:|---:|---:|")
    for row in rows:
        print(f"| {row['threads']} | {row['prompt_tok_s_ratio']:.2f} | {row['eval_tok_s_ratio']:.2f} |")
    m = result["memory"]
    print(f"\nferrox peak RSS {peak_rss / mib:.1f} MiB vs budget {budget / mib:.1f} MiB = (model file "
          f"{model_bytes / mib:.1f} MiB + {args.kv_type} KV cache {kv_bytes / mib:.1f} MiB) x {1 + RSS_MARGIN:.2f}: "
          f"{'within' if m['within_budget'] else 'OVER'} budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
