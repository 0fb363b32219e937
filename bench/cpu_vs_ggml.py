#!/usr/bin/env python3
"""ferrox's CPU figures beside ggml's.

Runs `ferrox bench --json` (decode n=1 and prefill n=512) at 1 and 2 threads
and prints, per kind: ferrox weight GB/s, its fraction of the memory read
bandwidth that the same run measured, and GFLOP/s, next to ggml's figures.

ggml's figures are the ones stated in issue 3 (Zen 5, 2 vCPU, AVX-512 VNNI),
NOT measured in this run: a same-run ggml measurement needs the
llama-cpp-python wheel (~/.cache/ferrox/wheels), whose bundled libggml could
be driven through ctypes; that is not done yet. The column says so.

Usage: bench/cpu_vs_ggml.py [--ferrox build/cpu3/bin/ferrox] [--threads 1,2]
"""
import argparse
import json
import subprocess

# Issue 3: ggml on Zen 5 2 vCPU. decode GB/s (n=1) and prefill GFLOP/s (n=512), {threads: value}.
GGML_DECODE_GBS = {
    "Q8_0": {1: 24.9, 2: 34.7}, "Q4_0": {1: 20.9, 2: 34.1}, "Q4_K": {1: 23.4, 2: 35.6},
    "Q5_K": {1: 19.1, 2: 28.1}, "Q6_K": {1: 25.5, 2: 36.6}, "IQ4_XS": {1: 10.6, 2: 22.7},
    "Q2_K": {1: 13.9, 2: 21.0}, "Q3_K": {1: 11.9, 2: 17.8},
}
GGML_PREFILL_GFLOPS = {
    "Q8_0": {1: 126, 2: 199}, "Q4_0": {1: 240, 2: 490}, "Q4_K": {1: 199, 2: 375},
    "Q5_K": {1: 59, 2: 96}, "Q6_K": {1: 76, 2: 133},
}


def ferrox_bench(exe, kinds, threads, batch, shape, reps):
    out = subprocess.run([exe, "bench", "--json", "--kinds", ",".join(kinds), "--shape", shape,
                          "-n", str(batch), "-t", str(threads), "--reps", str(reps)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferrox", default="build/cpu3/bin/ferrox")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shape", default="4096x4096")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--kinds", default="Q8_0,Q5_0,Q4_0,Q4_K,Q5_K,Q6_K,IQ4_XS,Q2_K,Q3_K")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    for t in (int(x) for x in args.threads.split(",")):
        dec = ferrox_bench(args.ferrox, kinds, t, 1, args.shape, args.reps)
        bw = dec["read_bandwidth_gb_per_s"]["median"]
        print(f"\n## {t} thread(s), decode n=1, {args.shape}; read bandwidth this run {bw:.1f} GB/s")
        print("| kind | ferrox GB/s | p10-p90 ms | of read BW | ggml GB/s (issue, not same run) | ferrox/ggml |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in dec["results"]:
            g = GGML_DECODE_GBS.get(r["kind"], {}).get(t)
            ratio = f"{r['weight_gb_per_s'] / g:.2f}" if g else "-"
            print(f"| {r['kind']} | {r['weight_gb_per_s']:.2f} | {r['p10_s']*1e3:.2f}-{r['p90_s']*1e3:.2f} | "
                  f"{100 * r['fraction_of_read_bandwidth']:.0f}% | {g if g else '-'} | {ratio} |")
        pre_kinds = [k for k in kinds if k in GGML_PREFILL_GFLOPS] or kinds[:1]
        pre = ferrox_bench(args.ferrox, pre_kinds, t, 512, args.shape, 3)
        print(f"\n## {t} thread(s), prefill n=512, {args.shape}")
        print("| kind | ferrox GFLOP/s | ggml GFLOP/s (issue, not same run) | ferrox/ggml |")
        print("|---|---:|---:|---:|")
        for r in pre["results"]:
            g = GGML_PREFILL_GFLOPS.get(r["kind"], {}).get(t)
            ratio = f"{r['gflop_per_s'] / g:.2f}" if g else "-"
            print(f"| {r['kind']} | {r['gflop_per_s']:.1f} | {g if g else '-'} | {ratio} |")


if __name__ == "__main__":
    main()
