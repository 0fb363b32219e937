#!/usr/bin/env python3
"""Stream a completion, then print what the engine reports about the run.

    python3 examples/python/generate.py MODEL.gguf "Once upon a time" [-n 64] [--seed 1]

With the wheel installed (`pip install ferrox-*.whl`), or against a build tree:
FERROX_LIBRARY=build/ci/lib/libferrox_core.so PYTHONPATH=python python3 ...
"""
import argparse
import sys

import ferrox


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("prompt")
    ap.add_argument("-n", "--max-tokens", type=int, default=64)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("-t", "--threads", type=int, default=0)
    args = ap.parse_args()
    try:
        model = ferrox.Model(args.model, n_threads=args.threads)
    except ferrox.FerroxError as e:  # the path, the step that refused it, the C status
        print(f"error: {e}", file=sys.stderr)
        return 1
    with model:
        print(f"{model.arch}: {model.n_layer} layers, vocab {model.n_vocab}; "
              f"{model.capacity['summary']}", file=sys.stderr)
        stream = model.generate(args.prompt, max_tokens=args.max_tokens, seed=args.seed,
                                stream=True)
        print(args.prompt, end="", flush=True)
        for piece in stream:
            print(piece, end="", flush=True)
        print()
        done = stream.completion
        calls, fallback = model.kernel_calls()
        print(f"{len(done.tokens)} tokens ({done.finish_reason}), "
              f"{done.tokens_per_second:.1f} tok/s; {calls} kernel calls, {fallback} through "
              f"a fallback", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
