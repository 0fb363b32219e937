#!/usr/bin/env python3
"""Scale-out on Ray Serve against one `ferrox serve` (issue 39's target):
2 replicas x 1 thread behind ferrox.serve.ray vs one `ferrox serve` x 2 threads,
the same streaming load (bench/openai_load.py: `clients` at once, `requests`
each), aggregate generated tokens/s and p99 time to first token. The target is
Ray's tokens/s >= 0.9 x the single server's.

    FERROX_BIN=build/ci/bin/ferrox python3 bench/ray_scale_out.py [--model GGUF]
        [--clients 16] [--requests 2] [--max-tokens 64] [--parallel 16]
        [--stream-interval-ms 0 [100 ...]] [--json]
    ... --smoke   # tiny-llama31, 4 clients x 1 request x 8 tokens: checks the
                  # script end to end in ~a minute, measures nothing worth quoting

`--parallel` is the single server's; each replica gets half. Each
`--stream-interval-ms` value is one Ray run with that setting (a stream's
chunks joined for up to that long on their way through Ray; 0: each token's
chunk alone). Loopback only.
Exit status 0 when every request of both runs succeeded.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))

import openai_load  # noqa: E402

GEMMA = pathlib.Path.home() / ".cache/ferrox/models/gemma-3-270m-q4_k_m.gguf"
TINY = pathlib.Path.home() / ".cache/ferrox/tiny-models/tiny-llama31.gguf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, seconds: float = 120) -> None:
    import urllib.request
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"ferrox serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("ferrox serve did not become ready")


def run_single(args, settings: dict) -> dict:
    from ferrox.serve._settings import FerroxSettings
    s = FerroxSettings.from_mapping(dict(settings, threads=2, parallel=args.parallel))
    port = free_port()
    proc = subprocess.Popen(s.serve_argv(port), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        return load(args, f"http://127.0.0.1:{port}/v1")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def run_ray(args, settings: dict, interval_ms: int) -> dict:
    import ray
    from ray import serve

    env = {"PYTHONPATH": str(ROOT / "python"), "FERROX_BIN": settings["ferrox_bin"]}
    if os.environ.get("FERROX_LIBRARY"):
        env["FERROX_LIBRARY"] = os.environ["FERROX_LIBRARY"]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        from ferrox.serve.ray import build_app
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        app = build_app(dict(settings, threads=1, parallel=max(1, args.parallel // 2),
                             stream_interval_ms=interval_ms),
                        {"num_replicas": 2})
        serve.run(app, name="ferrox", route_prefix="/")
        return load(args, f"http://127.0.0.1:{port}/v1")
    finally:
        serve.shutdown()
        ray.shutdown()


def load(args, base_url: str) -> dict:
    result = openai_load.run_load(base_url, clients=args.clients, requests=args.requests,
                                  max_tokens=args.max_tokens, timeout=args.timeout)
    return result.summary()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help=f"GGUF (default {GEMMA}; --smoke: {TINY})")
    ap.add_argument("--ferrox-bin", default=os.environ.get("FERROX_BIN", ""))
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--stream-interval-ms", type=int, nargs="+", default=[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = {"model": args.model or str(GEMMA), "ferrox_bin": args.ferrox_bin, "kv_type": "f16"}
    if args.smoke:
        args.clients, args.requests, args.max_tokens, args.parallel = 4, 1, 8, 4
        settings.update(model=args.model or str(TINY), extra_args=["--chat-template", "chatml"])
    if not args.ferrox_bin:
        ap.error("--ferrox-bin or $FERROX_BIN: the built ferrox")
    single = run_single(args, settings)
    runs = {ms: run_ray(args, settings, ms) for ms in args.stream_interval_ms}
    tps = single["tokens_per_s"]
    ratios = {ms: (r["tokens_per_s"] / tps if tps else 0.0) for ms, r in runs.items()}
    out = {"single_2_threads": single,
           "ray_2x1_thread": [dict(r, stream_interval_ms=ms, throughput_ratio=ratios[ms])
                              for ms, r in runs.items()],
           "target_ratio": 0.9, "smoke": args.smoke}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        rows = [("one ferrox serve x 2 threads", single)] + [
            (f"Ray 2 replicas x 1 thread, stream_interval_ms {ms}", r) for ms, r in runs.items()]
        for name, r in rows:
            print(f"{name}: {r['tokens_per_s']:.1f} tokens/s, p99 TTFT "
                  f"{openai_load.fmt_s(r['ttft_p99_s'])} s, {r['failed']} failed of {r['requests']}")
        for ms, ratio in ratios.items():
            print(f"ratio at stream_interval_ms {ms}: {ratio:.3f} (target >= 0.9)"
                  + (" [smoke: not a measurement]" if args.smoke else ""))
    return 0 if not single["failed"] and not any(r["failed"] for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
