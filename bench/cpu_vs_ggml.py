#!/usr/bin/env python3
"""ferrox's CPU kernels beside ggml's, measured in the same run.

For each thread count and kind, alternately (so drift on a shared machine hits
both alike) runs `ferrox bench --json` and bench/ggml/ggml_kernel_bench (ggml
from the installed llama-cpp-python wheel, weights repacked where ggml does
that), for decode (n=1, cold: both rotate over >= 1 GiB of weight copies) and
prefill (n=512, hot). Each pair is repeated --rounds times; tables give the
median over rounds with the min-max, ferrox's fraction of the read bandwidth
its bench measured, and the ratio ferrox/ggml. The issue's Zen 5 ggml figures
are printed too, for reference only: they come from another machine.

Usage: bench/cpu_vs_ggml.py [--ferrox build/release/bin/ferrox] [--threads 1,2]
       [--kinds Q8_0,Q4_K,...] [--prefill-kinds ... or "" for none] [--rounds 3]
       [--shape 4096x14336] [--json out.json]
"""
import argparse
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))

# Issue 3: ggml on a Zen 5, 2 vCPU machine (not this one). {threads: value}.
ISSUE_DECODE_GBS = {
    "Q8_0": {1: 24.9, 2: 34.7}, "Q4_0": {1: 20.9, 2: 34.1}, "Q4_K": {1: 23.4, 2: 35.6},
    "Q5_K": {1: 19.1, 2: 28.1}, "Q6_K": {1: 25.5, 2: 36.6}, "IQ4_XS": {1: 10.6, 2: 22.7},
    "Q2_K": {1: 13.9, 2: 21.0}, "Q3_K": {1: 11.9, 2: 17.8},
}
ISSUE_PREFILL_GFLOPS = {
    "Q8_0": {1: 126, 2: 199}, "Q4_0": {1: 240, 2: 490}, "Q4_K": {1: 199, 2: 375},
    "Q5_K": {1: 59, 2: 96}, "Q6_K": {1: 76, 2: 133},
}


def build_ggml_bench():
    out = subprocess.run(["bash", os.path.join(HERE, "ggml", "build.sh")], check=True,
                         capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def ferrox_bench(exe, kind, threads, n, shape, reps):
    cmd = [exe, "bench", "--json", "--kinds", kind, "--shape", shape, "-n", str(n), "-t", str(threads),
           "--reps", str(reps)]
    if n > 1:
        cmd.append("--hot")
    doc = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    row = doc["results"][0]
    row["read_bw"] = doc["read_bandwidth_gb_per_s"]["median"]
    return row


def ggml_bench(exe, kind, threads, n, shape, reps):
    rows, cols = shape.split("x")
    rotate = "1024" if n == 1 else "0"
    out = subprocess.run([exe, kind, rows, cols, str(n), str(threads), str(reps), rotate], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def spread(values):
    return statistics.median(values), min(values), max(values)


def fmt(values, digits=1):
    m, lo, hi = spread(values)
    return f"{m:.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ferrox", default="build/release/bin/ferrox")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shape", default="4096x4096")
    ap.add_argument("--kinds", default="Q8_0,Q5_0,Q4_0,Q4_K,Q5_K,Q6_K,IQ4_XS,Q2_K,Q3_K")
    ap.add_argument("--prefill-kinds", default="Q8_0,Q5_0,Q4_0,Q4_K,Q5_K,Q6_K")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write every measurement here")
    args = ap.parse_args()
    ggml = build_ggml_bench()
    record = []
    for t in (int(x) for x in args.threads.split(",")):
        for mode, n, kinds, reps in (("decode", 1, args.kinds, 15), ("prefill", 512, args.prefill_kinds, 3)):
            if not kinds:  # --prefill-kinds "" : decode only
                continue
            metric = "weight_gb_per_s" if n == 1 else "gflop_per_s"
            unit = "GB/s" if n == 1 else "GFLOP/s"
            issue = ISSUE_DECODE_GBS if n == 1 else ISSUE_PREFILL_GFLOPS
            print(f"\n## {mode}, n={n}, {args.shape}, {t} thread(s); median [min-max] over {args.rounds} rounds")
            print(f"| kind | ferrox {unit} | ggml {unit} (same run) | ferrox/ggml | ferrox of read BW "
                  f"| ggml repacked | issue's Zen 5 ggml |")
            print("|---|---:|---:|---:|---:|---|---:|")
            for kind in kinds.split(","):
                ours, theirs, ratios, fractions, repacked = [], [], [], [], "-"
                for _ in range(args.rounds):
                    f = ferrox_bench(args.ferrox, kind, t, n, args.shape, reps)
                    g = ggml_bench(ggml, kind, t, n, args.shape, reps)
                    if "skipped" in g:
                        break
                    ours.append(f[metric])
                    theirs.append(g[metric])
                    ratios.append(f[metric] / g[metric])
                    fractions.append(100 * f["weight_gb_per_s"] / f["read_bw"])
                    repacked = "yes" if g["repacked"] else "no"
                    record.append({"mode": mode, "threads": t, "kind": kind, "ferrox": f, "ggml": g})
                if not ours:
                    print(f"| {kind} | - | skipped: {g['skipped']} | - | - | - | - |")
                    continue
                ref = issue.get(kind, {}).get(t, "-")
                print(f"| {kind} | {fmt(ours)} | {fmt(theirs)} | {fmt(ratios, 2)} | {fmt(fractions, 0)}% "
                      f"| {repacked} | {ref} |", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(record, out, indent=1)


if __name__ == "__main__":
    main()
