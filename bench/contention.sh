#!/usr/bin/env bash
# Thread-pool contention check: ferrox decode at 1 thread, at 2 threads, and
# at 2 threads while another process keeps one core busy. The pool must not
# collapse: "2 threads, one core busy" should be no slower than 1 thread.
# Usage: bench/contention.sh [path/to/ferrox] [kinds]
set -euo pipefail
FERROX=${1:-build/cpu3/bin/ferrox}
KINDS=${2:-Q4_K,Q8_0}
ARGS=(bench --kinds "$KINDS" --shape 4096x4096 -n 1 --reps 40 --json)

run() { "$FERROX" "${ARGS[@]}" -t "$1" | python3 -c '
import json, sys
doc = json.load(sys.stdin)
for r in doc["results"]:
    print("  %-6s median %7.3f ms  p10-p90 %.3f-%.3f ms  %.2f GB/s" % (r["kind"], r["median_s"]*1e3, r["p10_s"]*1e3, r["p90_s"]*1e3, r["weight_gb_per_s"]))'; }

echo "1 thread, idle:";            run 1
echo "2 threads, idle:";           run 2
# A busy loop pinned to core 1 (no I/O, no memory traffic).
taskset -c 1 sh -c 'while :; do :; done' &
BUSY=$!
trap 'kill $BUSY 2>/dev/null || true' EXIT
sleep 0.5
echo "2 threads, core 1 busy:";    run 2
echo "1 thread, core 1 busy:";     run 1
