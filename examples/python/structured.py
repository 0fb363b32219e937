#!/usr/bin/env python3
"""Generate JSON that validates against a schema (or text that matches a GBNF grammar).

    python3 examples/python/structured.py MODEL.gguf "A person:" [--schema FILE.json | --grammar FILE.gbnf]

Without --schema or --grammar the schema below is used. Only tokens that can
continue the schema's grammar are drawn, and the answer ends where it is
complete; if -n runs out first, the text is not valid JSON and the example
says so (exit 1). With the wheel installed, or against a build tree:
FERROX_LIBRARY=build/ci/lib/libferrox_core.so PYTHONPATH=python python3 ...
"""
import argparse
import json
import sys

import ferrox

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("prompt")
    ap.add_argument("--schema", help="a JSON schema file")
    ap.add_argument("--grammar", help="a GBNF grammar file")
    ap.add_argument("-n", "--max-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("-t", "--threads", type=int, default=0)
    args = ap.parse_args()
    constraint = {}
    if args.grammar:
        with open(args.grammar, encoding="utf-8") as f:
            constraint["grammar"] = f.read()
    else:
        schema = PERSON
        if args.schema:
            with open(args.schema, encoding="utf-8") as f:
                schema = json.load(f)
        constraint["json_schema"] = schema
    try:
        with ferrox.Model(args.model, n_threads=args.threads) as model:
            out = model.generate(args.prompt, max_tokens=args.max_tokens, seed=args.seed,
                                 **constraint)
    except ferrox.InvalidGrammarError as e:  # names grammar:LINE:COL or the JSON pointer
        print(f"refused: {e.message}", file=sys.stderr)
        return 2
    except ferrox.FerroxError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(out.text)
    if not out.grammar_complete:
        print(f"stopped after {len(out.tokens)} tokens before the grammar was complete "
              "(raise -n)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
