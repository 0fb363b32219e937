#!/usr/bin/env python3
"""A chat in the terminal: the model's own template, the history kept in Python.

    python3 examples/python/chat.py MODEL.gguf [--system "Be brief."]

Each turn renders the whole conversation with the model's chat template (the
renderer `ferrox serve` uses) and streams the reply. Ctrl-D ends.
"""
import argparse
import sys

import ferrox


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--system", default=None)
    ap.add_argument("-n", "--max-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=None)
    args = ap.parse_args()
    messages = [{"role": "system", "content": args.system}] if args.system else []
    with ferrox.Model(args.model) as model:
        while True:
            try:
                user = input("> ")
            except EOFError:
                print()
                return 0
            messages.append({"role": "user", "content": user})
            reply = []
            try:
                for piece in model.chat(messages, max_tokens=args.max_tokens,
                                        temperature=args.temperature, stream=True):
                    reply.append(piece)
                    print(piece, end="", flush=True)
            except ferrox.InvalidArgumentError as e:  # e.g. the conversation outgrew n_ctx
                print(f"\nerror: {e}", file=sys.stderr)
                messages.pop()
                continue
            print()
            messages.append({"role": "assistant", "content": "".join(reply)})


if __name__ == "__main__":
    sys.exit(main())
