#!/usr/bin/env python3
"""`ferrox batched-bench` beside llama.cpp's `llama-batched-bench` on one model.

llama-batched-bench is built from the llama-cpp-python sdist CI already caches
(~/.cache/ferrox/sdist, ci/fetch_test_data.sh) into ~/.cache/ferrox/llama.cpp-<version>
(once, by bench/llama_build.py; never committed). Then, for --rounds rounds, the two
engines run alternately (so drift on a shared machine hits both alike) with the same -npp/-ntg/-npl and
threads; the tables give, per -npl, the median over rounds of aggregate prefill and
decode tokens/s with the min-max, and ferrox / llama.cpp for decode.

Usage: bench/batched_vs_llama.py --model M.gguf [--ferrox build/release/bin/ferrox]
       [--threads 2] [--npp 128] [--ntg 128] [--npl 1,2,4,8,16] [--kv f16]
       [--rounds 3] [--json out.json]
"""
import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys

from llama_build import build_llama_tool

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"
                 r"\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|")


def parse_table(text: str) -> dict:
    """npl -> (prefill tok/s, decode tok/s) from a markdown table either engine prints."""
    out = {}
    for line in text.splitlines():
        m = ROW.match(line.strip())
        if m:
            out[int(m.group(3))] = (float(m.group(6)), float(m.group(8)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--ferrox", default="build/release/bin/ferrox")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--npp", type=int, default=128)
    ap.add_argument("--ntg", type=int, default=128)
    ap.add_argument("--npl", default="1,2,4,8,16")
    ap.add_argument("--kv", default="f16", choices=["f16", "f32"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    npl = [int(x) for x in a.npl.split(",")]
    cells = a.npp * max(npl) + a.ntg * max(npl)
    llama = build_llama_tool("llama-batched-bench")
    llama_cmd = [str(llama), "-m", a.model, "-c", str(max(cells, 8192)), "-b", "2048", "-ub", "512",
                 "-npp", str(a.npp), "-ntg", str(a.ntg), "-npl", a.npl, "-t", str(a.threads),
                 "-ctk", a.kv, "-ctv", a.kv]
    ferrox_cmd = [a.ferrox, "--log-level", "warn", "batched-bench", "-m", a.model,
                  "--npp", str(a.npp), "--ntg", str(a.ntg), "--npl", a.npl, "-t", str(a.threads),
                  "--kv-type", a.kv, "--resident", "off", "-b", "512"]  # = llama's -ub
    results = {"ferrox": [], "llama.cpp": []}
    for r in range(a.rounds):
        for name, cmd in (("llama.cpp", llama_cmd), ("ferrox", ferrox_cmd)):
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"{name} failed ({p.returncode}):\n{p.stderr[-2000:]}")
            table = parse_table(p.stdout + p.stderr)
            if not table:
                sys.exit(f"{name}: no table in its output:\n{p.stdout[-2000:]}")
            results[name].append(table)
            print(f"round {r + 1}/{a.rounds} {name}: " +
                  ", ".join(f"npl {k}: {v[1]:.1f}" for k, v in sorted(table.items())) + " decode tok/s",
                  file=sys.stderr)
    summary = {}
    for name, rounds in results.items():
        print(f"\n{name} (-npp {a.npp} -ntg {a.ntg}, {a.kv} KV, {a.threads} threads; "
              f"median [min-max] of {a.rounds} rounds)\n")
        print("| npl | prefill tok/s | decode tok/s |")
        print("|----:|--------------:|-------------:|")
        for k in npl:
            pp = [t[k][0] for t in rounds]
            tg = [t[k][1] for t in rounds]
            summary.setdefault(name, {})[k] = {"pp": pp, "tg": tg}
            print(f"| {k} | {statistics.median(pp):.1f} [{min(pp):.1f}-{max(pp):.1f}] | "
                  f"{statistics.median(tg):.1f} [{min(tg):.1f}-{max(tg):.1f}] |")
    print("\n| npl | ferrox / llama.cpp decode | ferrox decode / its npl 1 |")
    print("|----:|---------------------------:|--------------------------:|")
    base = statistics.median(summary["ferrox"][npl[0]]["tg"])
    for k in npl:
        f = statistics.median(summary["ferrox"][k]["tg"])
        l = statistics.median(summary["llama.cpp"][k]["tg"])
        print(f"| {k} | {f / l:.2f} | {f / base:.2f} |")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps({"args": vars(a), "results": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
