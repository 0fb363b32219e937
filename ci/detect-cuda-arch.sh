#!/usr/bin/env bash
# Prints "AUTO <arch>" when this host has an NVIDIA GPU that nvidia-smi can see
# and nvcc to build for it (arch as CMake spells it: compute capability 9.0 -> 90),
# "OFF" otherwise. The main job builds the CUDA plugin only for such a GPU.
set -euo pipefail
if command -v nvidia-smi >/dev/null 2>&1 &&
   { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  if [[ "$cap" =~ ^[0-9]{2,3}$ ]]; then
    echo "AUTO $cap"
    exit 0
  fi
fi
echo "OFF"
