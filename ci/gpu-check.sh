#!/usr/bin/env bash
# The one-command GPU check of the CUDA plugin, run on the lent GPU machine
# from a bundle that ci/gpu-bundle.sh built elsewhere (nothing is built here):
#
#   bash ci/gpu-check.sh build/gpu-bundle
#
# Steps, each under its own timeout, the whole under 7.5 minutes:
#   1. nvidia-smi -L (when present)
#   2. ferrox backends with [cuda, cpu], cuda required: cuda must be ready
#   3. test_cuda_gpu: every kernel against the CPU reference (must pass)
#   4. ferrox_cuda_bandwidth: D2D copy GB/s, the yardstick
#   5. ferrox_cuda_bench (the plugin's ABI, random blocks): MATVEC per kind
#      at 8192x28672, weights cold (rotating over >= 1 GiB of device copies,
#      far beyond H200's 50 MB L2), then GEMM n=512 for the tiled GEMM kinds
#   6. ferrox bench (the core's dispatch, [cuda, cpu]) MATVEC for Q8_0, Q4_0
#      (the kinds whose reference quantizer makes 8192x28672 in seconds)
#   7. whole models: the bundled tiny models through ci/gpu_model_parity.py
#      (cuda resident vs cuda with host activations vs cpu), then decode
#      tokens/s [cuda] vs [cpu] on a Gemma 3 270M-shaped model filled in from
#      the carried header (or on $FERROX_GPU_MODEL)
# then prints one markdown table. Exit 0 only when every step passed; the
# optional decode step is skipped, not failed, without a model header.
# Environment: FERROX_GPU_MODEL (a GGUF file; default: the first of the
# bundle's models/*.gguf, if any), FERROX_GPU_CHECK_SHAPE
# (default 8192x28672), FERROX_GPU_CHECK_GEMM_SHAPE (default 8192x28672),
# FERROX_GPU_CHECK_LIMIT_S (the whole check's limit, default 450).
# With $OUT set (the device tool), the full log is also written to $OUT.
set -euo pipefail

if [[ ${FERROX_GPU_CHECK_BOUNDED:-} != 1 ]]; then
    # The whole check, bounded: re-run this script under one timeout.
    export FERROX_GPU_CHECK_BOUNDED=1
    log=/dev/null
    [[ -n ${OUT:-} && -d ${OUT:-} ]] && log=$OUT/gpu-check.log
    set +e
    limit=${FERROX_GPU_CHECK_LIMIT_S:-450}
    timeout --kill-after=10 "$limit" bash "${BASH_SOURCE[0]}" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    ((rc == 124 || rc == 137)) && echo "gpu-check: FAILED: the whole check ran past ${limit}s" | tee -a "$log"
    exit "$rc"
fi

bundle=${1:?usage: bash ci/gpu-check.sh <bundle-dir> (built by ci/gpu-bundle.sh)}
bundle=$(cd "$bundle" && pwd)
shape=${FERROX_GPU_CHECK_SHAPE:-8192x28672}
gemm_shape=${FERROX_GPU_CHECK_GEMM_SHAPE:-8192x28672}
matvec_kinds=(F16 Q8_0 Q4_0 Q4_K Q5_K Q6_K)
gemm_kinds=(Q8_0 Q4_0 Q4_K Q6_K)
dispatch_kinds=(Q8_0 Q4_0)  # quick to quantize; see step 6
goal_kinds=" Q4_K Q6_K Q8_0 "  # goal: >= 80% of the copy bandwidth

ferrox=$bundle/bin/ferrox
config=$bundle/etc/ferrox/gpu-check.yaml
export FERROX_CUDA_PLUGIN=$bundle/lib/ferrox/plugins/libferrox_cuda.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

step() { echo; echo "=== gpu-check [$((SECONDS - started))s]: $*"; }
fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }
# bounded SECONDS CMD...: the step's own timeout; 124 reads as a timeout.
bounded() {
    local seconds=$1
    shift
    local rc=0
    timeout --kill-after=5 "$seconds" "$@" || rc=$?
    ((rc == 124 || rc == 137)) && echo "gpu-check: step timed out after ${seconds}s: $*" >&2
    return "$rc"
}

for file in "$ferrox" "$config" "$FERROX_CUDA_PLUGIN" "$bundle/bin/test_cuda_gpu" \
    "$bundle/bin/ferrox_cuda_bandwidth"; do
    [[ -e $file ]] || fail "$file is missing: build the bundle with 'bash ci/gpu-bundle.sh'"
done
command -v python3 >/dev/null || fail "python3 is needed to read ferrox's JSON output"
[[ -f $bundle/BUNDLE.txt ]] && cat "$bundle/BUNDLE.txt"

# ---- 1. the device ----------------------------------------------------------------
step "nvidia-smi -L"
if command -v nvidia-smi >/dev/null; then
    bounded 30 nvidia-smi -L || echo "(nvidia-smi failed; the plugin's own probe decides below)"
else
    echo "(no nvidia-smi on PATH; the plugin's own probe decides below)"
fi

# ---- 2. cuda must be ready ----------------------------------------------------------
step "ferrox backends, order [cuda, cpu], cuda required"
backends_rc=0
bounded 60 "$ferrox" --config "$config" backends --json >"$work/backends.json" 2>"$work/backends.err" ||
    backends_rc=$?
cuda_state=$(python3 - "$work/backends.json" <<'PY' || true
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except ValueError:
    print("unreadable\tferrox backends printed no JSON"); sys.exit()
for b in doc.get("backends", []):
    if b["name"] == "cuda":
        devices = "; ".join(f"{d['name']} ({d['memory_free'] >> 20} MiB free of "
                            f"{d['memory_total'] >> 20} MiB)" for d in b.get("devices", []))
        print(f"{b['state']}\t{b.get('reason') or devices}")
        break
else:
    print("not-listed\tno cuda backend in the output")
PY
)
state=${cuda_state%%$'\t'*}
reason=${cuda_state#*$'\t'}
echo "cuda: ${state:-unknown}: $reason"
if [[ $state != ready ]]; then
    cat "$work/backends.err" >&2
    fail "no CUDA device: this check needs the lent GPU machine (cuda backend is '${state:-unknown}': $reason)"
fi
((backends_rc == 0)) || { cat "$work/backends.err" >&2; fail "ferrox backends exited $backends_rc"; }

# ---- 3. every kernel against the reference ----------------------------------------------
step "test_cuda_gpu (every kernel vs the CPU reference, NMSE <= 1e-5)"
gpu_rc=0
bounded 180 "$bundle/bin/test_cuda_gpu" --durations yes >"$work/test_cuda_gpu.log" 2>&1 || gpu_rc=$?
# Per-kernel NMSE lines, when the test prints them (it prints "nmse" in its
# INFO lines and summary); the Catch2 totals always.
grep -E '^(nmse |test_cuda_gpu: seed|SKIPPED)' "$work/test_cuda_gpu.log" || true
grep -E '^(All tests passed|test cases:)' "$work/test_cuda_gpu.log" || true
if ((gpu_rc != 0)); then
    tail -80 "$work/test_cuda_gpu.log"
    fail "test_cuda_gpu exited $gpu_rc (77 = it saw no device)"
fi

# ---- 4. the yardstick ---------------------------------------------------------------
step "ferrox_cuda_bandwidth (D2D cudaMemcpy, 2 GiB, read+write bytes counted)"
bounded 60 "$bundle/bin/ferrox_cuda_bandwidth" --mib 2048 --reps 20 | tee "$work/bandwidth.txt"
copy_gbs=$(sed -n 's/^copy_gb_per_s median \([0-9.]*\).*/\1/p' "$work/bandwidth.txt")
[[ -n $copy_gbs ]] || fail "no bandwidth figure from ferrox_cuda_bandwidth"

# ---- 5./6. timings --------------------------------------------------------------------
# ferrox_cuda_bench: the plugin's ABI alone, random blocks (made in ~1 s).
# ferrox bench: through the core's dispatch; its weights come from the
# reference quantizer (minutes per K-quant matrix of this size on one core),
# so only the kinds whose quantizer is quick go through it.
plugin_bench() {  # plugin_bench NAME SECONDS ARGS...
    local name=$1 seconds=$2
    shift 2
    bounded "$seconds" "$bundle/bin/ferrox_cuda_bench" "$@" >"$work/$name.json" \
        2>"$work/$name.err" || { cat "$work/$name.err" >&2; fail "ferrox_cuda_bench ($name) failed"; }
    sed 's/^ferrox_cuda_bench: /  /' "$work/$name.err"
}
step "ferrox_cuda_bench: MATVEC $shape, ${matvec_kinds[*]}, weights cold (rotating over >= 1 GiB)"
plugin_bench matvec 150 --kinds "$(IFS=,; echo "${matvec_kinds[*]}")" --shape "$shape" -n 1 \
    --reps 50 --rotate-mib 1024
step "ferrox_cuda_bench: GEMM n=512 $gemm_shape, ${gemm_kinds[*]}"
plugin_bench gemm 120 --kinds "$(IFS=,; echo "${gemm_kinds[*]}")" --shape "$gemm_shape" -n 512 \
    --reps 5 --hot

step "ferrox bench (core dispatch, [cuda, cpu]): MATVEC $shape, ${dispatch_kinds[*]}, cold"
bounded 150 "$ferrox" --config "$config" bench --json --kinds "$(IFS=,; echo "${dispatch_kinds[*]}")" \
    --shape "$shape" -n 1 --reps 50 --rotate-mib 1024 >"$work/dispatch.json" 2>"$work/dispatch.err" ||
    { cat "$work/dispatch.err" >&2; fail "ferrox bench failed"; }
python3 - "$work/dispatch.json" <<'PY' || { cat "$work/dispatch.err" >&2; fail "ferrox bench did not run on cuda"; }
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
bad = [r for r in rows if r["backend"] != "cuda"]
assert rows and not bad, f"rows not on cuda (a CPU fallback): {bad or 'none at all'}"
for r in rows:
    print(f"  {r['kind']}: {r['weight_gb_per_s']:.0f} GB/s, {r['median_s'] * 1e3:.3f} ms ({r['kernel']})")
PY

# ---- 7. whole models ---------------------------------------------------------------------
# Failures here are collected, not fatal at once, so the benchmark table above
# still comes out; the script exits 1 at the end when any happened.
model_failures=()
cuda_only=$bundle/etc/ferrox/gpu-cuda-only.yaml
cpu_only=$bundle/etc/ferrox/gpu-cpu-only.yaml

# The decode model: FERROX_GPU_MODEL, else a model the bundle carries
# (gpu-bundle.sh's FERROX_GPU_BUNDLE_MODEL), else one shaped like Gemma 3 270M
# filled in here from its carried header (random blocks of the same kinds:
# the same bytes per token as the real model; the text is nonsense).
decode_note="skipped: no models/gemma-3-270m.header or no ferrox_synth_gguf in the bundle"
if [[ -z ${FERROX_GPU_MODEL:-} ]]; then
    bundled_models=("$bundle"/models/*.gguf)
    [[ -f ${bundled_models[0]} ]] && FERROX_GPU_MODEL=${bundled_models[0]}
fi
if [[ -z ${FERROX_GPU_MODEL:-} && -f $bundle/models/gemma-3-270m.header && -x $bundle/bin/ferrox_synth_gguf ]]; then
    step "ferrox_synth_gguf fill: a Gemma 3 270M-shaped model from the carried header"
    if bounded 60 "$bundle/bin/ferrox_synth_gguf" fill "$bundle/models/gemma-3-270m.header" \
        "$work/gemma-3-270m-synth.gguf"; then
        FERROX_GPU_MODEL=$work/gemma-3-270m-synth.gguf
    else
        model_failures+=("ferrox_synth_gguf fill failed")
    fi
fi

# cuda resident vs cuda with host activations vs cpu (logits NMSE, greedy
# tokens; ci/gpu_model_parity.py says the thresholds) on the tiny models and
# the decode model.
parity_models=("$bundle"/models/tiny/*.gguf)
[[ -f ${parity_models[0]} ]] || parity_models=()
[[ -n ${FERROX_GPU_MODEL:-} && -f ${FERROX_GPU_MODEL:-} ]] && parity_models+=("$FERROX_GPU_MODEL")
if ((${#parity_models[@]})); then
    step "whole models: cuda resident vs cuda host activations vs cpu (${#parity_models[@]} models)"
    bounded 200 python3 "$bundle/bin/gpu_model_parity.py" "$ferrox" "$cuda_only" "$cpu_only" \
        "${parity_models[@]}" | tee "$work/models.txt" ||
        model_failures+=("whole-model checks failed (see above)")
else
    echo "(no models: whole-model checks skipped)" | tee "$work/models.txt"
fi

if [[ -n ${FERROX_GPU_MODEL:-} ]]; then
    step "ferrox run on $FERROX_GPU_MODEL: decode tokens/s, [cuda] resident vs [cpu]"
    [[ -f $FERROX_GPU_MODEL ]] || fail "FERROX_GPU_MODEL=$FERROX_GPU_MODEL is not a file"
    decode_ok=1
    for only in cuda cpu; do
        bounded 120 "$ferrox" --config "$bundle/etc/ferrox/gpu-$only-only.yaml" run \
            -m "$FERROX_GPU_MODEL" -p "The capital of France is" -n 128 --temp 0 --json \
            >"$work/run-$only.json" 2>"$work/run-$only.err" ||
            { cat "$work/run-$only.err" >&2; model_failures+=("ferrox run ([$only]) failed"); decode_ok=0; }
    done
    ((decode_ok)) && decode_note=$(python3 - "$work/run-cuda.json" "$work/run-cpu.json" <<'PY'
import json, sys
cuda, cpu = (json.load(open(p)) for p in sys.argv[1:3])
ratio = cuda["eval_tokens_per_s"] / cpu["eval_tokens_per_s"] if cpu["eval_tokens_per_s"] else float("nan")
misses = sum(k["outcome"] != "hit" for k in cuda["kernels"])
print(f"cuda {cuda['eval_tokens_per_s']:.1f} tok/s decode, {cuda['prompt_tokens_per_s']:.1f} tok/s prompt "
      f"({'resident' if cuda.get('resident') else 'NOT resident: ' + str(cuda.get('residency'))}, "
      f"{misses} kernels not hits); cpu {cpu['eval_tokens_per_s']:.1f} tok/s decode; "
      f"cuda/cpu {ratio:.1f}x ({cuda['model']})")
PY
)
    echo "$decode_note"
fi

# ---- the table ----------------------------------------------------------------------------
step "summary"
python3 - "$work/matvec.json" "$work/gemm.json" "$work/dispatch.json" "$copy_gbs" "$goal_kinds" \
    "$decode_note" "$work/models.txt" <<'PY'
import json, sys
load = lambda path: json.load(open(path))["results"]
matvec, gemm, dispatch = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
copy = float(sys.argv[4])
goal_kinds = sys.argv[5].split()
via_core = {r["kind"]: r for r in dispatch}
print(f"D2D copy bandwidth (read+write bytes counted): {copy:.0f} GB/s\n")
print("| op | kind | shape | n | kernel | median ms | weight GB/s | % of copy | via ferrox bench | GFLOP/s | goal |")
print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---|")
for r in matvec:
    share = 100 * r["weight_gb_per_s"] / copy
    goal = (("met" if share >= 80 else "MISSED") + " (>= 80%)") if r["kind"] in goal_kinds else ""
    core = via_core.get(r["kind"])
    core_text = f"{core['weight_gb_per_s']:.0f} GB/s ({100 * core['weight_gb_per_s'] / copy:.0f}%)" if core else ""
    print(f"| MATVEC | {r['kind']} | {r['shape']} | 1 | {r['kernel']} | {r['median_s'] * 1e3:.3f} "
          f"| {r['weight_gb_per_s']:.0f} | {share:.0f}% | {core_text} | {r['gflop_per_s']:.0f} | {goal} |")
for r in gemm:
    print(f"| GEMM | {r['kind']} | {r['shape']} | {r['n']} | {r['kernel']} | {r['median_s'] * 1e3:.3f} "
          f"| {r['weight_gb_per_s']:.0f} | | | {r['gflop_per_s']:.0f} | |")
print(f"\ndecode: {sys.argv[6]}")
print("\nwhole models (vs cuda host activations and vs cpu):")
print(open(sys.argv[7]).read().rstrip() or "  (none)")
PY
echo
if ((${#model_failures[@]})); then
    printf 'gpu-check: FAILED: %s\n' "${model_failures[@]}" >&2
    exit 1
fi
echo "gpu-check: passed in $((SECONDS - started))s (goals are reported, not enforced)"
