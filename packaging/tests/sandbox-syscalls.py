#!/usr/bin/env python3
"""Would ferrox-server.service's seccomp and W^X settings stop this command?

Runs a command under strace -f and checks, from what it actually did:
  - every system call it made is in the unit's SystemCallFilter= set (default
    @system-service, expanded with `systemd-analyze syscall-filter`); one outside
    it would fail with EPERM under the unit;
  - no mapping was made writable and executable at once, and no mprotect() added
    PROT_EXEC (what MemoryDenyWriteExecute=yes refuses).
This is how the unit's sandbox is checked without starting it under systemd (CI
machines and containers have no systemd as PID 1). It covers only the code paths
the command took.

  packaging/tests/sandbox-syscalls.py [--filter @system-service] [--strace-log F] -- CMD...
Exit status: 0 clean, 1 a violation (listed), 2 the command itself failed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

CALL = re.compile(r"^\d+\s+(?:<\.\.\. )?([a-z_0-9]+)[( ]")


def expand_filter(name: str) -> set[str]:
    text = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True,
                          check=True).stdout
    groups: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@"):
            current = line.strip()
            groups[current] = []
        elif current and line.strip() and not line.strip().startswith("#"):
            groups[current].append(line.strip())
    if name not in groups:
        sys.exit(f"unknown syscall group {name}")

    def walk(g: str, seen: set[str]) -> set[str]:
        out: set[str] = set()
        for item in groups.get(g, []):
            if item.startswith("@"):
                if item not in seen:
                    out |= walk(item, seen | {item})
            else:
                out.add(item)
        return out

    return walk(name, {name})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default="@system-service")
    ap.add_argument("--strace-log")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")
    allowed = expand_filter(a.filter)
    with tempfile.TemporaryDirectory() as tmp:
        log = a.strace_log or os.path.join(tmp, "strace.log")
        p = subprocess.run(["strace", "-f", "-qq", "-o", log, *cmd], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            print(f"the command failed ({p.returncode}): {p.stderr[-1500:]}", file=sys.stderr)
            return 2
        lines = open(log, errors="replace").read().splitlines()
    used: set[str] = set()
    wx = []
    for line in lines:
        m = CALL.match(line)
        if not m:
            continue
        used.add(m.group(1))
        if m.group(1) in ("mmap", "mprotect", "pkey_mprotect") and "PROT_EXEC" in line:
            if m.group(1) != "mmap" or "PROT_WRITE" in line:
                wx.append(line.strip())
    outside = sorted(used - allowed)
    print(f"{len(used)} distinct system calls in {len(lines)} strace lines; "
          f"{len(outside)} outside {a.filter}; {len(wx)} W+X mappings or PROT_EXEC mprotects")
    for s in outside:
        print(f"  not in {a.filter}: {s}")
    for w in wx[:10]:
        print(f"  W^X: {w}")
    return 1 if outside or wx else 0


if __name__ == "__main__":
    sys.exit(main())
