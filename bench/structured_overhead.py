#!/usr/bin/env python3
"""What constrained decoding costs: `ferrox serve` beside llama.cpp's `llama-server`, same run.

Two measurements of issue #34's targets, each on both servers (one server runs at a
time; engines and variants alternate per round so drift on a shared machine hits all):

  schema  decode with `response_format: json_schema` against the same requests without
          it, at each --clients level (default 1 and 16): aggregate tokens/s and the
          median per-request decode rate (tokens after the first over the time after the
          first, so prefill is excluded). Overhead = 1 - constrained / plain. The model's
          own chat template.
  tools   time to the first generated token of a 20-tool request (a request for one token,
          not streamed), one request at a time:
          tool_choice "required" (a grammar over 20 parameter schemas from the first
          token) and "auto" against tool_choice "none" with the same tools, whose prompt
          is the same (the prompt token counts are printed to show it), so the ratio is
          the grammar's own cost; and the request without tools, for scale. Gemma 3's
          template has no tool format, so this phase gives both servers the same
          tool-capable template (--tools-template; default Qwen3's from the template cache).

llama-server is built from the cached llama-cpp-python sdist (bench/llama_build.py).

Usage: bench/structured_overhead.py [--model M.gguf] [--ferrox build/release/bin/ferrox]
       [--clients 1,16] [--requests 2] [--max-tokens 64] [--threads 2] [--rounds 3]
       [--tools 20] [--tool-requests 6] [--tool-cold-requests 1] [--only ferrox|llama] [--phases schema,tools]
       [--json out.json]
       bench/structured_overhead.py --smoke [--ferrox ...]   (CI: ferrox alone, 1 round, 3 tools, no
       cold prefill: a check that it works, not a measurement)
Exit status: 0, or 1 when a request failed or a server did not start.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

import openai_load
from serve_vs_llama_server import DEFAULT_MODEL, Server, free_port
from llama_build import build_llama_tool

TEMPLATES = pathlib.Path.home() / ".cache/ferrox/templates"

# Long enough that answers reach max_tokens: a title, at least three paragraphs, a rating.
STORY_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "paragraphs": {"type": "array", "items": {"type": "string"}, "minItems": 3},
        "rating": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["title", "paragraphs", "rating"],
    "additionalProperties": False,
}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "story", "schema": STORY_SCHEMA, "strict": True}}
# Small enough to finish within max_tokens: whether whole constrained answers validate.
CARD_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "rating": {"type": "integer", "minimum": 1, "maximum": 10},
        "tags": {"type": "array", "items": {"enum": ["old", "new", "busy", "calm"]}, "maxItems": 3},
    },
    "required": ["city", "rating", "tags"],
    "additionalProperties": False,
}

TOOL_PROMPT = "What is the weather in Lisbon tomorrow, and convert 12 miles to kilometres?"


def make_tools(n: int) -> list[dict]:
    """n distinct function tools with varied parameter schemas (strings, enums, numbers, arrays)."""
    kinds = [
        {"type": "string", "description": "a city name"},
        {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
        {"type": "integer", "minimum": 0, "maximum": 1000},
        {"type": "number"},
        {"type": "array", "items": {"type": "string"}, "maxItems": 4},
        {"type": "boolean"},
    ]
    tools = []
    for i in range(n):
        props = {f"arg_{j}": kinds[(i + j) % len(kinds)] for j in range(1 + i % 4)}
        tools.append({"type": "function", "function": {
            "name": f"tool_{i:02d}", "description": f"Tool number {i}: does task {i} for the user.",
            "parameters": {"type": "object", "properties": props, "required": sorted(props)[:1]}}})
    return tools


def start(name: str, a, logdir: pathlib.Path, template: pathlib.Path | None, parallel: int, ctx: int) -> Server:
    port = free_port()
    if name == "ferrox":
        cmd = [a.ferrox, "serve", "-m", str(a.model), "--host", "127.0.0.1", "--port", str(port),
               "--parallel", str(parallel), "-c", str(ctx), "-t", str(a.threads), "--kv-type", "f16"]
        if template:
            cmd += ["--chat-template", str(template)]
        server = Server("ferrox", cmd, port, "/ready", logdir)
    else:
        cmd = [str(build_llama_tool("llama-server")), "-m", str(a.model), "--host", "127.0.0.1", "--port", str(port),
               "-np", str(parallel), "-c", str(ctx), "-t", str(a.threads), "-tb", str(a.threads),
               "-ctk", "f16", "-ctv", "f16", "--jinja"]
        if template:
            cmd += ["--chat-template-file", str(template)]
        server = Server("llama-server", cmd, port, "/health", logdir)
    server.start(a.start_timeout)
    return server


def schema_round(name: str, a, logdir, problems: list[str], r: int) -> dict:
    """One server start: for each client level, plain and json_schema (order alternating)."""
    server = start(name, a, logdir, None, a.parallel, a.ctx_per_seq * a.parallel)
    out: dict = {}
    try:
        openai_load.run_load(server.base_url, clients=1, requests=1, max_tokens=4, timeout=a.timeout)
        for clients in a.clients:
            variants = [("plain", None), ("json_schema", {"response_format": RESPONSE_FORMAT})]
            for label, extra in (variants if r % 2 == 0 else variants[::-1]):
                res = openai_load.run_load(server.base_url, clients=clients, requests=a.requests,
                                           max_tokens=a.max_tokens, timeout=a.timeout, extra=extra)
                s = res.summary()
                out[f"{label}@{clients}"] = s
                problems.extend(f"{name} {label} {clients} clients: {e}" for e in s["errors"])
                print(f"  {name:12s} {label:11s} {clients:3d} clients: {s['tokens_per_s']:7.1f} tok/s, "
                      f"decode p50 {openai_load.fmt_s(s['decode_tokens_per_s_p50'])} tok/s/request, "
                      f"{s['generated_tokens']} tokens, {s['failed']} failed", file=sys.stderr)
        out["validity"] = check_schema_output(server.base_url, a)
        if out["validity"]["invalid"]:
            problems.append(f"{name}: a constrained answer did not validate: {out['validity']}")
    finally:
        server.stop(a.stop_timeout)
    return out


def check_schema_output(base_url: str, a) -> dict:
    """Whole answers under a small schema, with room to finish: do they parse and validate?"""
    import jsonschema
    client = openai_load.make_client(base_url, "none", a.timeout)
    model = openai_load.first_model(base_url)
    counts = {"valid": 0, "invalid": 0, "cut_short": 0}
    card = {"type": "json_schema", "json_schema": {"name": "card", "schema": CARD_SCHEMA, "strict": True}}
    for seed in (1, 2, 3):
        resp = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Describe a city you like as a JSON card."}],
            max_tokens=200, temperature=1.0, seed=seed, response_format=card)
        choice = resp.choices[0]
        if choice.finish_reason == "length":
            counts["cut_short"] += 1
            continue
        try:
            jsonschema.validate(json.loads(choice.message.content or ""), CARD_SCHEMA)
            counts["valid"] += 1
        except (ValueError, jsonschema.ValidationError):
            counts["invalid"] += 1
    client.close()
    return counts


def ttft_once(client, model: str, extra: dict, a, system: str | None = None) -> tuple[float | None, int | None, str]:
    """The time of a request for one token (prefill, the grammar's setup and its first mask).

    Not a stream's first chunk: a streamed tool call's first delta waits until the call's name
    is whole, several tokens in, which would time decode rather than the first token.
    `system`: a system message first; a new one each time defeats the servers' prompt caches."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": TOOL_PROMPT}]
    start = time.perf_counter()
    try:
        resp = client.chat.completions.create(model=model, messages=messages, max_tokens=1, temperature=0,
                                              seed=7, **extra)
    except Exception as e:  # noqa: BLE001: reported, never hidden
        return None, None, openai_load.printable(f"{type(e).__name__}: {e}")
    elapsed = time.perf_counter() - start
    return elapsed, (resp.usage.prompt_tokens if resp.usage else None), ""


def tools_round(name: str, a, logdir, problems: list[str], r: int) -> dict:
    # One sequence with room for the tools' long prompt (20 tools render to ~2,400 tokens).
    server = start(name, a, logdir, a.tools_template, 1, 4096)
    tools = make_tools(a.tools)
    variants = [("no tools", {}), ("none", {"tools": tools, "tool_choice": "none"}),
                ("auto", {"tools": tools, "tool_choice": "auto"}),
                ("required", {"tools": tools, "tool_choice": "required"})]
    # "cached": the prompt's prefix is in the server's cache (prefill is a few tokens, so the
    # grammar's own setup shows); "cold": a new system message first, so all of it is prefilled.
    out: dict = {f"{label} {temp}": {"ttft_s": [], "prompt_tokens": set()}
                 for temp in ("cached", "cold") for label, _ in variants}
    try:
        client = openai_load.make_client(server.base_url, "none", a.timeout)
        model = openai_load.first_model(server.base_url)
        ttft_once(client, model, variants[1][1], a)  # warm-up; the tools prompt into the prefix cache
        plan = [("cached", i) for i in range(a.tool_requests)] + [("cold", i) for i in range(a.tool_cold_requests)]
        for temp, i in plan:
            # Cached: the tool variants only. A request without tools between them would take
            # ferrox's one sequence slot and so the cached prefix (llama-server keeps more).
            chosen = variants if temp == "cold" else variants[1:]
            order = chosen if (r + i) % 2 == 0 else chosen[::-1]
            for label, extra in order:
                system = f"Session {r}-{i}-{label}: answer briefly." if temp == "cold" else None
                ttft, pt, err = ttft_once(client, model, extra, a, system)
                if err:
                    problems.append(f"{name} tools {label} {temp}: {err}")
                    continue
                if ttft is not None:
                    out[f"{label} {temp}"]["ttft_s"].append(ttft)
                if pt is not None:
                    out[f"{label} {temp}"]["prompt_tokens"].add(pt)
        client.close()
    finally:
        server.stop(a.stop_timeout)
    for v in out.values():
        v["prompt_tokens"] = sorted(v["prompt_tokens"])
    print(f"  {name:12s} tools: " + ", ".join(
        f"{k} {openai_load.fmt_s(statistics.median(v['ttft_s']) if v['ttft_s'] else None)} s "
        f"({v['prompt_tokens']} prompt tokens)" for k, v in out.items()), file=sys.stderr)
    return out


def spread(values: list[float], digits: int = 1, scale: float = 1.0) -> str:
    v = [x * scale for x in values if x is not None]
    return f"{statistics.median(v):.{digits}f} [{min(v):.{digits}f}-{max(v):.{digits}f}]" if v else "-"


def print_schema(a, results: dict[str, list[dict]]) -> None:
    print(f"\n### json_schema decode cost (streaming chat, {a.requests} requests per client, max_tokens "
          f"{a.max_tokens}, {a.threads} threads, --parallel {a.parallel}; median [min-max] over rounds)\n")
    print("| engine | clients | plain tok/s | json_schema tok/s | overhead (aggregate) | plain decode/request "
          "| json_schema decode/request | overhead (per request) |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for name, rounds in results.items():
        for c in a.clients:
            col = lambda label, k: [rd[f"{label}@{c}"][k] for rd in rounds]  # noqa: E731
            over = lambda k: [100 * (1 - s / p) for s, p in zip(col("json_schema", k), col("plain", k))  # noqa: E731
                              if s and p]
            print(f"| {name} | {c} | {spread(col('plain', 'tokens_per_s'))} | "
                  f"{spread(col('json_schema', 'tokens_per_s'))} | {spread(over('tokens_per_s'))} % | "
                  f"{spread(col('plain', 'decode_tokens_per_s_p50'))} | "
                  f"{spread(col('json_schema', 'decode_tokens_per_s_p50'))} | "
                  f"{spread(over('decode_tokens_per_s_p50'))} % |")
        valid = {k: sum(rd["validity"][k] for rd in rounds) for k in ("valid", "invalid", "cut_short")}
        print(f"\n{name}: whole answers under the small schema (max_tokens 200, temperature 1): {valid}")


def print_tools(a, results: dict[str, list[dict]]) -> None:
    print(f"\n### time to first token with {a.tools} tools (one request at a time, {a.threads} threads, "
          f"template {a.tools_template.name}; median [min-max] of every request over all rounds, ms; "
          f"cached: the prompt's prefix in the server's cache, tool variants only; cold: a new system "
          f"message first, so all of it is prefilled)\n")
    print("| engine | prefix | no tools | tools, none | tools, auto | tools, required | auto / none | required / none "
          "| prompt tokens (no tools / tools) |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for (name, rounds), temp in ((x, t) for x in results.items() for t in ("cached", "cold")):
        rounds = [{k.rsplit(" ", 1)[0]: v for k, v in rd.items() if k.endswith(" " + temp)} for rd in rounds]
        get = lambda label: [t for rd in rounds for t in rd[label]["ttft_s"]]  # noqa: E731
        med = lambda label: statistics.median(get(label)) if get(label) else None  # noqa: E731
        ratio = lambda x, y: f"{med(x) / med(y):.2f}" if med(x) and med(y) else "-"  # noqa: E731
        pts = lambda label: sorted({p for rd in rounds for p in rd[label]["prompt_tokens"]})  # noqa: E731
        print(f"| {name} | {temp} | {spread(get('no tools'), 0, 1000)} | {spread(get('none'), 0, 1000)} | "
              f"{spread(get('auto'), 0, 1000)} | {spread(get('required'), 0, 1000)} | {ratio('auto', 'none')} | "
              f"{ratio('required', 'none')} | {pts('no tools')} / {pts('none')} {pts('required')} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=pathlib.Path, default=DEFAULT_MODEL)
    ap.add_argument("--ferrox", default="build/release/bin/ferrox")
    ap.add_argument("--clients", default="1,16")
    ap.add_argument("--requests", type=int, default=2, help="requests per client (schema phase)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, help="sequences per server (default: the largest --clients)")
    ap.add_argument("--ctx-per-seq", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tools", type=int, default=20)
    ap.add_argument("--tool-requests", type=int, default=6, help="requests per variant per round (tools phase)")
    ap.add_argument("--tool-cold-requests", type=int, default=1,
                    help="requests per variant per round with a new system message (full prefill)")
    ap.add_argument("--tools-template", type=pathlib.Path, default=TEMPLATES / "Qwen-Qwen3-0.6B.jinja")
    ap.add_argument("--phases", default="schema,tools")
    ap.add_argument("--only", choices=["ferrox", "llama"])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--start-timeout", type=float, default=120.0)
    ap.add_argument("--stop-timeout", type=float, default=60.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.smoke:
        a.only, a.clients, a.requests, a.max_tokens, a.rounds = "ferrox", "1,2", 1, 8, 1
        a.tools, a.tool_requests, a.tool_cold_requests = 3, 1, 0
        a.ctx_per_seq = min(a.ctx_per_seq, 1024)
    a.clients = [int(x) for x in a.clients.split(",")]
    a.parallel = a.parallel or max(a.clients)
    phases = a.phases.split(",")
    if not a.model.is_file():
        sys.exit(f"no model file {a.model}")
    if "tools" in phases and not a.tools_template.is_file():
        sys.exit(f"no template {a.tools_template} (--tools-template)")
    if a.only != "llama" and not os.access(a.ferrox, os.X_OK):
        sys.exit(f"no ferrox executable at {a.ferrox} (--ferrox)")
    engines = {"ferrox": ["ferrox"], "llama": ["llama-server"]}.get(a.only, ["llama-server", "ferrox"])
    results = {p: {n: [] for n in engines} for p in phases}
    problems: list[str] = []
    rounds = {"schema": schema_round, "tools": tools_round}
    with tempfile.TemporaryDirectory(prefix="structured-bench-") as tmp:
        for r in range(a.rounds):
            for phase in phases:
                for name in (engines if r % 2 == 0 else engines[::-1]):
                    print(f"round {r + 1}/{a.rounds}: {phase}, {name}", file=sys.stderr)
                    try:
                        results[phase][name].append(rounds[phase](name, a, pathlib.Path(tmp), problems, r))
                    except RuntimeError as e:
                        problems.append(str(e))
                        break
    if "schema" in phases and all(results["schema"].values()):
        print_schema(a, results["schema"])
    if "tools" in phases and all(results["tools"].values()):
        print_tools(a, results["tools"])
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                                    "results": results}, indent=2, default=list))
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
