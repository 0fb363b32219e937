#!/usr/bin/env bash
# The one-command GPU check of the CUDA plugin, run on the lent GPU machine
# from a bundle that ci/gpu-bundle.sh built elsewhere (nothing is built here):
#
#   bash ci/gpu-check.sh build/gpu-bundle
#
# Steps, each under its own timeout, the whole under 5 minutes (it took ~2 on an H200):
#   1. nvidia-smi -L (when present)
#   2. ferrox backends with [cuda, cpu], cuda required: cuda must be ready
#   3. test_cuda_gpu: every kernel against the CPU reference (must pass)
#   4. ferrox_cuda_bandwidth: D2D copy GB/s, the yardstick
#   5. ferrox_cuda_bench (the plugin's ABI, random blocks): MATVEC per kind
#      at 8192x28672, weights cold (rotating over >= 1 GiB of device copies,
#      far beyond H200's 60 MB L2), then GEMM n=512 for the tiled GEMM kinds
#   6. ferrox bench (the core's dispatch, [cuda, cpu]) MATVEC, the same kinds
#   7. whole models: the bundled tiny models (llama, gemma2; gpt-oss and
#      qwen3moe filled in from carried headers) and a Gemma 3 270M-shaped
#      model through ci/gpu_model_parity.py (cuda resident vs cuda with host
#      activations vs cpu)
#   8. test_cuda_batches: 4-sequence batches (attention over a unified cache
#      of cells) resident vs host activations, and a sequence alone vs among
#      others, on the tiny models
#   9. speed: ferrox run decode tokens/s [cuda] vs [cpu] on the Gemma-shaped
#      model, and ferrox batched-bench (prefill and decode tokens/s at 1, 4
#      and 16 sequences) on it and on a Qwen2-7B-shaped Q4_K_M model
# then prints one markdown table. Exit 0 only when every step passed; a step
# whose model the bundle lacks is skipped, not failed. A failing step does
# not stop the later ones (device time is scarce): all failures are listed
# at the end.
# Environment: FERROX_GPU_MODEL (a GGUF file; default: the first of the
# bundle's models/*.gguf, if any), FERROX_GPU_CHECK_SHAPE
# (default 8192x28672), FERROX_GPU_CHECK_GEMM_SHAPE (default 8192x28672),
# FERROX_GPU_CHECK_LIMIT_S (the whole check's limit, default 300),
# FERROX_GPU_CHECK_ONLY (space-separated step names to run, for a rerun of
# what failed: kernels bandwidth matvec gemm dispatch models batches speed;
# default all).
# With $OUT set (the device tool), the full log is also written to $OUT.
set -euo pipefail

if [[ ${FERROX_GPU_CHECK_BOUNDED:-} != 1 ]]; then
    # The whole check, bounded: re-run this script under one timeout.
    export FERROX_GPU_CHECK_BOUNDED=1
    log=/dev/null
    [[ -n ${OUT:-} && -d ${OUT:-} ]] && log=$OUT/gpu-check.log
    set +e
    limit=${FERROX_GPU_CHECK_LIMIT_S:-300}
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
dispatch_kinds=("${matvec_kinds[@]}")
goal_kinds=" Q4_K Q6_K Q8_0 "  # goal: >= 80% of the copy bandwidth

ferrox=$bundle/bin/ferrox
config=$bundle/etc/ferrox/gpu-check.yaml
export FERROX_CUDA_PLUGIN=$bundle/lib/ferrox/plugins/libferrox_cuda.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
started=$SECONDS

step() { echo; echo "=== gpu-check [$((SECONDS - started))s]: $*"; }
fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }
failures=()
failed() { echo "gpu-check: step failed: $*" >&2; failures+=("$*"); }
# wanted NAME: whether FERROX_GPU_CHECK_ONLY (empty: everything) names the step.
wanted() { [[ -z ${FERROX_GPU_CHECK_ONLY:-} || " $FERROX_GPU_CHECK_ONLY " == *" $1 "* ]]; }
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
if wanted kernels; then
    step "test_cuda_gpu (every kernel vs the CPU reference, NMSE <= 1e-5)"
    gpu_rc=0
    bounded 180 "$bundle/bin/test_cuda_gpu" --durations yes >"$work/test_cuda_gpu.log" 2>&1 || gpu_rc=$?
    # Per-kernel NMSE lines, when the test prints them; the Catch2 totals always.
    grep -E '^(nmse |test_cuda_gpu: seed|SKIPPED)' "$work/test_cuda_gpu.log" || true
    grep -E '^(All tests passed|test cases:)' "$work/test_cuda_gpu.log" || true
    if ((gpu_rc != 0)); then
        tail -120 "$work/test_cuda_gpu.log"
        failed "test_cuda_gpu exited $gpu_rc (77 = it saw no device)"
    fi
    [[ -n ${OUT:-} && -d ${OUT:-} ]] && cp "$work/test_cuda_gpu.log" "$OUT/" || true
fi

# ---- 4. the yardstick ---------------------------------------------------------------
copy_gbs=0
if wanted bandwidth || wanted matvec || wanted dispatch; then
    step "ferrox_cuda_bandwidth (D2D cudaMemcpy, 2 GiB, read+write bytes counted)"
    bounded 60 "$bundle/bin/ferrox_cuda_bandwidth" --mib 2048 --reps 20 | tee "$work/bandwidth.txt" ||
        failed "ferrox_cuda_bandwidth"
    copy_gbs=$(sed -n 's/^copy_gb_per_s median \([0-9.]*\).*/\1/p' "$work/bandwidth.txt")
    [[ -n $copy_gbs ]] || { failed "no bandwidth figure from ferrox_cuda_bandwidth"; copy_gbs=0; }
fi

# ---- 5./6. timings --------------------------------------------------------------------
# ferrox_cuda_bench: the plugin's ABI alone, random blocks (made in ~1 s).
# ferrox bench: through the core's dispatch; its weights are 64 rows from
# the reference quantizer, repeated.
plugin_bench() {  # plugin_bench NAME SECONDS ARGS...
    local name=$1 seconds=$2
    shift 2
    if bounded "$seconds" "$bundle/bin/ferrox_cuda_bench" "$@" >"$work/$name.json" 2>"$work/$name.err"; then
        sed 's/^ferrox_cuda_bench: /  /' "$work/$name.err"
    else
        cat "$work/$name.err" >&2
        rm -f "$work/$name.json"
        failed "ferrox_cuda_bench ($name)"
    fi
}
if wanted matvec; then
    step "ferrox_cuda_bench: MATVEC $shape, ${matvec_kinds[*]}, weights cold (rotating over >= 1 GiB)"
    plugin_bench matvec 150 --kinds "$(IFS=,; echo "${matvec_kinds[*]}")" --shape "$shape" -n 1 \
        --reps 50 --rotate-mib 1024
fi
if wanted gemm; then
    step "ferrox_cuda_bench: GEMM n=512 $gemm_shape, ${gemm_kinds[*]}"
    plugin_bench gemm 120 --kinds "$(IFS=,; echo "${gemm_kinds[*]}")" --shape "$gemm_shape" -n 512 \
        --reps 5 --hot
fi
if wanted dispatch; then
    step "ferrox bench (core dispatch, [cuda, cpu]): MATVEC $shape, ${dispatch_kinds[*]}, cold"
    if bounded 150 "$ferrox" --config "$config" bench --json --kinds "$(IFS=,; echo "${dispatch_kinds[*]}")" \
        --shape "$shape" -n 1 --reps 20 --rotate-mib 1024 >"$work/dispatch.json" 2>"$work/dispatch.err"; then
        python3 - "$work/dispatch.json" <<'PY' || { cat "$work/dispatch.err" >&2; failed "ferrox bench did not run on cuda"; }
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
bad = [r for r in rows if r["backend"] != "cuda"]
assert rows and not bad, f"rows not on cuda (a CPU fallback): {bad or 'none at all'}"
for r in rows:
    print(f"  {r['kind']}: {r['weight_gb_per_s']:.0f} GB/s, {r['median_s'] * 1e3:.3f} ms ({r['kernel']})")
PY
    else
        cat "$work/dispatch.err" >&2
        rm -f "$work/dispatch.json"
        failed "ferrox bench"
    fi
fi

# ---- 7. whole models ---------------------------------------------------------------------
cuda_only=$bundle/etc/ferrox/gpu-cuda-only.yaml
cpu_only=$bundle/etc/ferrox/gpu-cpu-only.yaml

# fill HEADER OUT: random valid blocks of the header's kinds (the same bytes
# per token as the real model; the text is nonsense).
fill() {
    bounded 120 "$bundle/bin/ferrox_synth_gguf" fill "$1" "$2" >/dev/null || { failed "ferrox_synth_gguf fill $1"; return 1; }
}
tiny_models=("$bundle"/models/tiny/*.gguf)
[[ -f ${tiny_models[0]} ]] || tiny_models=()
needs_models=0
wanted models || wanted batches || wanted speed && needs_models=1
if ((needs_models)); then
    step "ferrox_synth_gguf fill: models from the carried headers"
    mkdir -p "$work/tiny"
    for header in "$bundle"/models/tiny/*.header; do
        [[ -f $header ]] || continue
        out=$work/tiny/$(basename "$header" .header).gguf
        fill "$header" "$out" && tiny_models+=("$out")
    done
    gemma_model=${FERROX_GPU_MODEL:-}
    if [[ -z $gemma_model && -f $bundle/models/gemma-3-270m.header ]]; then
        fill "$bundle/models/gemma-3-270m.header" "$work/gemma-3-270m-synth.gguf" &&
            gemma_model=$work/gemma-3-270m-synth.gguf
    fi
    big_model=
    if wanted speed && [[ -f $bundle/models/qwen2-7b-q4_k_m.header ]]; then
        fill "$bundle/models/qwen2-7b-q4_k_m.header" "$work/qwen2-7b-q4_k_m-synth.gguf" &&
            big_model=$work/qwen2-7b-q4_k_m-synth.gguf
    fi
    ls -la "$work"/tiny "$work"/*.gguf 2>/dev/null | sed "s/^/  /" || true
fi

# cuda resident vs cuda with host activations vs cpu (logits NMSE, greedy
# tokens; ci/gpu_model_parity.py says the thresholds).
if wanted models; then
    parity_models=("${tiny_models[@]}")
    [[ -n ${gemma_model:-} ]] && parity_models+=("$gemma_model")
    if ((${#parity_models[@]})); then
        step "whole models: cuda resident vs cuda host activations vs cpu (${#parity_models[@]} models)"
        bounded 240 python3 "$bundle/bin/gpu_model_parity.py" "$ferrox" "$cuda_only" "$cpu_only" \
            "${parity_models[@]}" | tee "$work/models.txt" || failed "whole-model checks (see above)"
    else
        echo "(no models: whole-model checks skipped)" | tee "$work/models.txt"
    fi
fi

# ---- 8. many sequences --------------------------------------------------------------------
if wanted batches; then
    if ((${#tiny_models[@]})) && [[ -x $bundle/bin/test_cuda_batches ]]; then
        step "test_cuda_batches: 4 sequences, resident vs host activations, alone vs among others"
        bounded 120 "$bundle/bin/test_cuda_batches" "${tiny_models[@]}" 2>"$work/batches.err" |
            tee "$work/batches.txt" || { tail -20 "$work/batches.err"; failed "test_cuda_batches"; }
    else
        echo "(no tiny models or no test_cuda_batches: skipped)" | tee "$work/batches.txt"
    fi
fi

# ---- 9. speed ------------------------------------------------------------------------------
decode_note="skipped"
if wanted speed && [[ -n ${gemma_model:-} ]]; then
    step "ferrox run on $(basename "$gemma_model"): decode tokens/s, [cuda] resident vs [cpu]"
    decode_ok=1
    for only in cuda cpu; do
        bounded 120 "$ferrox" --config "$bundle/etc/ferrox/gpu-$only-only.yaml" run \
            -m "$gemma_model" -p "The capital of France is" -n 128 --temp 0 --json \
            >"$work/run-$only.json" 2>"$work/run-$only.err" ||
            { cat "$work/run-$only.err" >&2; failed "ferrox run ([$only])"; decode_ok=0; }
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
batched_models=()
if wanted speed; then
    [[ -n ${gemma_model:-} ]] && batched_models+=("$gemma_model")
    [[ -n ${big_model:-} ]] && batched_models+=("$big_model")
fi
for model in "${batched_models[@]}"; do
    name=$(basename "$model" .gguf)
    step "ferrox batched-bench [cuda] on $name: -npp 512 -ntg 128, 1/4/16 sequences, f16 KV"
    bounded 180 "$ferrox" --config "$cuda_only" batched-bench -m "$model" --npp 512 --ntg 128 \
        --npl 1,4,16 --kv-type f16 --json >"$work/batched-$name.json" 2>"$work/batched-$name.err" ||
        { tail -20 "$work/batched-$name.err" >&2; rm -f "$work/batched-$name.json"; failed "batched-bench on $name"; }
done

# ---- the table ----------------------------------------------------------------------------
step "summary"
python3 - "$work" "$copy_gbs" "$goal_kinds" "$decode_note" <<'PY'
import glob, json, os, sys
work, copy, goal_kinds, decode_note = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
def load(name):
    path = os.path.join(work, name)
    return json.load(open(path))["results"] if os.path.exists(path) else []
matvec, gemm, dispatch = load("matvec.json"), load("gemm.json"), load("dispatch.json")
via_core = {r["kind"]: r for r in dispatch}
if copy:
    print(f"D2D copy bandwidth (read+write bytes counted): {copy:.0f} GB/s\n")
if matvec or gemm:
    print("| op | kind | shape | n | kernel | median ms | weight GB/s | % of copy | via ferrox bench | GFLOP/s | goal |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---|")
for r in matvec:
    share = 100 * r["weight_gb_per_s"] / copy if copy else float("nan")
    goal = (("met" if share >= 80 else "MISSED") + " (>= 80%)") if r["kind"] in goal_kinds else ""
    core = via_core.get(r["kind"])
    core_text = f"{core['weight_gb_per_s']:.0f} GB/s ({100 * core['weight_gb_per_s'] / copy:.0f}%)" if core and copy else ""
    print(f"| MATVEC | {r['kind']} | {r['shape']} | 1 | {r['kernel']} | {r['median_s'] * 1e3:.3f} "
          f"| {r['weight_gb_per_s']:.0f} | {share:.0f}% | {core_text} | {r['gflop_per_s']:.0f} | {goal} |")
for r in gemm:
    print(f"| GEMM | {r['kind']} | {r['shape']} | {r['n']} | {r['kernel']} | {r['median_s'] * 1e3:.3f} "
          f"| {r['weight_gb_per_s']:.0f} | | | {r['gflop_per_s']:.0f} | |")
print(f"\ndecode (ferrox run, 128 tokens): {decode_note}")
for path in sorted(glob.glob(os.path.join(work, "batched-*.json"))):
    doc = json.load(open(path))
    print(f"\nbatched-bench [cuda], {os.path.basename(doc['model'])}:")
    print("| npl | prefill tok/s | decode tok/s (aggregate) | step ms |")
    print("|---:|---:|---:|---:|")
    for r in doc["rows"]:
        print(f"| {r['npl']} | {r['s_pp_tok_s']:.0f} | {r['s_tg_tok_s']:.0f} | {r['step_ms']:.2f} |")
for name, title in (("models.txt", "whole models (vs cuda host activations and vs cpu)"),
                    ("batches.txt", "4-sequence batches (test_cuda_batches)")):
    path = os.path.join(work, name)
    if os.path.exists(path):
        print(f"\n{title}:")
        print(open(path).read().rstrip() or "  (none)")
PY
echo
if ((${#failures[@]})); then
    printf 'gpu-check: FAILED: %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "gpu-check: passed in $((SECONDS - started))s (goals are reported, not enforced)"
