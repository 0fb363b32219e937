#!/usr/bin/env python3
"""The Kubernetes example against the image it deploys (what a schema cannot know).

    check_k8s_example.py packaging/kubernetes/ferrox.yaml IMAGE_CONFIG.json

IMAGE_CONFIG.json is the image config's "config" object (check_image.py prints it).
Checks: the container runs as the image's uid, non-root, read-only root, no
privilege escalation, all capabilities dropped; its command is the image's with
0.0.0.0 and the image's port; the key comes from a Secret (the server refuses
0.0.0.0 without one); liveness and startup probe /health, readiness /ready, on the
port the image exposes; the grace period exceeds the server's drain timeout; the
Service targets that port. Exits 1 naming each disagreement.
"""
from __future__ import annotations

import json
import sys

import yaml

DEFAULT_DRAIN_TIMEOUT_S = 30  # ferrox serve --drain-timeout's default (docs/server.md)


def main() -> int:
    docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
    image = json.load(open(sys.argv[2]))
    problems: list[str] = []

    def want(cond: bool, what: str) -> None:
        if not cond:
            problems.append(what)

    by_kind = {d["kind"]: d for d in docs}
    pod = by_kind["Deployment"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    uid = int(image["User"].split(":")[0])
    pod_sc, sc = pod.get("securityContext", {}), c.get("securityContext", {})
    want(pod_sc.get("runAsNonRoot") is True, "runAsNonRoot is not true")
    want(pod_sc.get("runAsUser", uid) == uid, f"runAsUser {pod_sc.get('runAsUser')} is not the image's {uid}")
    want(sc.get("readOnlyRootFilesystem") is True, "the root file system is writable")
    want(sc.get("allowPrivilegeEscalation") is False, "privilege escalation allowed")
    want(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities are not all dropped")

    args = c.get("args") or image["Cmd"]
    want(args[: len(image["Cmd"])] == image["Cmd"], f"args {args} do not start with the image's Cmd")
    port = int(args[args.index("--port") + 1])
    want(f"{port}/tcp" in image["ExposedPorts"], f"port {port} is not one the image exposes")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    want(port in ports.values(), f"containerPort {ports} is not the server's {port}")
    keys = [e for e in c.get("env", []) if e["name"] == "FERROX_API_KEY"]
    want(bool(keys) and "secretKeyRef" in keys[0].get("valueFrom", {}), "FERROX_API_KEY does not come from a Secret")

    def probe_port(p: dict) -> int:
        ref = p["httpGet"]["port"]
        return ports.get(ref, ref) if isinstance(ref, str) else ref

    for name, path in (("livenessProbe", "/health"), ("startupProbe", "/health"), ("readinessProbe", "/ready")):
        p = c.get(name)
        want(p is not None and p["httpGet"]["path"] == path, f"{name} does not GET {path}")
        if p:
            want(probe_port(p) == port, f"{name} probes port {probe_port(p)}, the server listens on {port}")

    drain = int(args[args.index("--drain-timeout") + 1]) if "--drain-timeout" in args else DEFAULT_DRAIN_TIMEOUT_S
    grace = pod.get("terminationGracePeriodSeconds", 30)
    want(grace > drain, f"terminationGracePeriodSeconds {grace} does not exceed the drain timeout {drain}")

    target = by_kind["Service"]["spec"]["ports"][0]["targetPort"]
    want(ports.get(target, target) == port, f"the Service targets {target}, the server listens on {port}")

    for p in problems:
        print(f"check_k8s_example: {sys.argv[1]}: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
