#!/usr/bin/env python3
"""Several prompts in one context: each step decodes one token of every sequence.

    python3 examples/python/batched.py MODEL.gguf [-n 32] "prompt one" "prompt two" ...

Each sequence gets the tokens it would get alone (same seed); the decode steps
are shared, so the aggregate tokens/s grows with the number of prompts.
"""
import argparse
import sys
import time

import ferrox


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("prompts", nargs="+")
    ap.add_argument("-n", "--max-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n = len(args.prompts)
    with ferrox.Model(args.model, n_seq_max=n) as model:
        started = time.perf_counter()
        results = model.batched(args.prompts, max_tokens=args.max_tokens, seed=args.seed)
        seconds = time.perf_counter() - started
        for prompt, result in zip(args.prompts, results):
            print(f"[{result.finish_reason}] {prompt}{result.text}")
        total = sum(len(r.tokens) for r in results)
        print(f"{n} sequences, {total} tokens in {seconds:.2f} s "
              f"({total / seconds:.1f} tok/s in all)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
