#!/usr/bin/env python3
"""Whole-model checks of the CUDA plugin, for ci/gpu-check.sh (python3 stdlib only:
the GPU machine has no numpy).

For each model, through the real CLI:
  cuda resident   order [cuda], the forward pass in device memory (ABI 1.2)
  cuda host       order [cuda] with --resident off: weight products on the GPU,
                  every other op in host memory (the core's loops)
  cpu             order [cpu]
and compares teacher-forced logits (NMSE per row) and greedy tokens:
  resident vs host   same weight kernels, so only the elementwise ops and attention
                     differ (device vs host float order, device tanhf in GeGLU):
                     worst row NMSE <= 1e-5 and identical greedy tokens;
  resident vs cpu    the CPU plugin rounds activations to 8 bits like llama.cpp:
                     mean <= 5e-3, worst <= 5e-2 (the tiny-gemma3 vs float64 budget;
                     an exact-f32 forward measures 2e-3 mean against it).
A wrong forward (tests/parity/test_resident_parity.py injects one per op) costs
> 1e-1. Prints one line per model and exits 1 when any check fails.

usage: gpu_model_parity.py FERROX CUDA_YAML CPU_YAML MODEL...
"""
import array
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

RESIDENT_VS_HOST_WORST = 1e-5
VS_CPU_MEAN, VS_CPU_WORST = 5e-3, 5e-2
TOKENS = [1, 651, 603, 108, 2, 17, 330, 84, 900, 41, 5, 77, 312, 12, 9, 400, 27, 808, 64, 150]  # < 1000: in every vocabulary
GREEDY = 16


# Per call: a tiny model takes seconds. Well inside gpu-check.sh's 150 s for the
# whole step, so a hung call is reported here (and its process killed) instead
# of the step's timeout killing this script and orphaning the ferrox child.
CALL_TIMEOUT_S = 45


def ferrox(binary, config, *args):
    return subprocess.run([binary, "--config", config, *args], capture_output=True, text=True,
                          timeout=CALL_TIMEOUT_S)


def logits(binary, config, model, tokens, extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "logits.f32"
        r = ferrox(binary, config, "logits", "-m", model, "--tokens", ",".join(map(str, tokens)),
                   "--out", str(out), "-c", "64", *extra)
        if r.returncode != 0:
            raise RuntimeError(f"ferrox logits {' '.join(extra)} failed: {r.stderr.strip()[-400:]}")
        values = array.array("f")
        values.frombytes(out.read_bytes())
    vocab = len(values) // len(tokens)
    return [values[i * vocab:(i + 1) * vocab] for i in range(len(tokens))]


def greedy(binary, config, model, extra):
    r = ferrox(binary, config, "run", "-m", model, "-p", "The capital of France is", "-n", str(GREEDY),
               "--temp", "0", "--json", *extra)
    if r.returncode != 0:
        raise RuntimeError(f"ferrox run {' '.join(extra)} failed: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout)


def nmse(got, want):
    err = sum((g - w) ** 2 for g, w in zip(got, want))
    ref = sum(w * w for w in want)
    if not all(math.isfinite(g) for g in got):
        return math.inf
    return err / max(ref, 1e-30)


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    binary, cuda_yaml, cpu_yaml, models = argv[1], argv[2], argv[3], argv[4:]
    failed = False
    for model in models:
        name = os.path.basename(model)
        try:
            run = greedy(binary, cuda_yaml, model, [])
            if not run.get("resident"):
                raise RuntimeError(f"not resident on cuda: {run.get('residency')}")
            misses = [k for k in run["kernels"] if k["outcome"] != "hit"]
            host_run = greedy(binary, cuda_yaml, model, ["--resident", "off"])
            cpu_run = greedy(binary, cpu_yaml, model, [])
            resident = logits(binary, cuda_yaml, model, TOKENS, [])
            host = logits(binary, cuda_yaml, model, TOKENS, ["--resident", "off"])
            cpu = logits(binary, cpu_yaml, model, TOKENS, [])
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            print(f"  {name}: FAILED: {e}")
            failed = True
            continue
        vs_host = [nmse(a, b) for a, b in zip(resident, host)]
        vs_cpu = [nmse(a, b) for a, b in zip(resident, cpu)]
        same_tokens = run["tokens"] == host_run["tokens"]
        cpu_tokens = sum(a == b for a, b in zip(run["tokens"], cpu_run["tokens"]))
        ok = (max(vs_host) <= RESIDENT_VS_HOST_WORST and same_tokens and not misses
              and sum(vs_cpu) / len(vs_cpu) <= VS_CPU_MEAN and max(vs_cpu) <= VS_CPU_WORST)
        failed |= not ok
        print(f"  {name}: {'ok' if ok else 'FAILED'}: resident vs host NMSE worst {max(vs_host):.2e}, "
              f"greedy {'identical' if same_tokens else 'DIFFERENT'}; vs cpu NMSE mean "
              f"{sum(vs_cpu) / len(vs_cpu):.2e} worst {max(vs_cpu):.2e}, greedy {cpu_tokens}/{GREEDY} same; "
              f"{len(run['kernels'])} kernels, {len(misses)} not hits; decode {run['eval_tokens_per_s']:.0f} "
              f"tok/s resident, {host_run['eval_tokens_per_s']:.0f} host, {cpu_run['eval_tokens_per_s']:.0f} cpu")
        for k in misses:
            print(f"    not a hit: {k['op']} {k['role']} {k['kind']}: {k['detail']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
