#!/usr/bin/env bash
# Installs what building and testing ferrox needs on Debian 12: Debian packages
# (only those missing) and the Python packages the tests use as references.
# Idempotent and quiet; safe to run on every CI start.
# --build-only: just what building the CLI and plugins needs (the main job).
set -euo pipefail
build_only=0
[ "${1:-}" = --build-only ] && build_only=1

debs=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost-dev libyaml-cpp-dev libspdlog-dev libfmt-dev catch2 libcli11-dev nlohmann-json3-dev
  libcurl4-openssl-dev libssl-dev       # ferrox pull: downloads (libcurl) and SHA-256 (libcrypto)
)
((build_only)) || debs+=(
  clang-14 libclang-rt-14-dev          # libFuzzer targets
  clang-format                          # the format check (Debian 12: clang-format 14)
  dpkg-dev fakeroot lintian file debootstrap strace  # packaging tests
  buildah iproute2                      # the container image (packaging/oci) and its private network
  systemd                               # systemd-analyze verify of the server unit (test-debs.sh)
  binutils                              # readelf for the CUDA plugin's NEEDED check
  curl                                  # the server tests call ferrox serve with curl too
)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "ci/install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

((build_only)) && exit 0

# Independent references for the tests: the gguf package's quant formats and writer;
# the official OpenAI client (server tests, bench/openai_load.py) and Anthropic's
# (the /v1/messages tests); jsonschema and jinja2, the references of the
# structured-output and template tests; wheel, with which ci/python_wheel.sh packs
# the Python package without a download.
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
  "gguf==0.19.0" numpy pytest openai anthropic jsonschema jinja2 wheel 2>&1 | grep -v "^WARNING" || true
# SentencePiece, which tests/parity/test_ugm_parity.py trains unigram models with and
# holds the "t5" tokenizer to (pinned: the reference; its wheel stays in ~/.cache/pip).
python3 -c 'import sys, sentencepiece; sys.exit(sentencepiece.__version__ != "0.2.1")' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --cache-dir "$HOME/.cache/pip" "sentencepiece==0.2.1" 2>&1 | grep -v "^WARNING" || true
# Kubernetes' own schemas, which packaging/oci/test-image.sh checks the example against.
python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
  --cache-dir "$HOME/.cache/pip" "kubernetes-validate==1.37.0" 2>&1 | grep -v "^WARNING" || true
# Ray Serve, the distributed serving engine python/ferrox/serve/ray.py plugs into
# (tests/python/test_ray_scale_out.py fails without it). Pinned: its request-router
# API is alpha. The wheels stay in pip's cache under ~/.cache/pip.
python3 -c 'import sys, ray.serve; sys.exit(ray.__version__ != "2.60.0")' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --cache-dir "$HOME/.cache/pip" "ray[serve]==2.60.0" 2>&1 | grep -v "^WARNING" || true

# OpenTelemetry's own protobuf definitions, with which tests/server/test_traces.py
# parses every OTLP/JSON body the server sends (an independent reference). Its
# wheels stay in pip's cache under ~/.cache/pip.
python3 -c 'import google.protobuf.json_format, opentelemetry.proto.collector.trace.v1' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    --cache-dir "$HOME/.cache/pip" opentelemetry-proto protobuf 2>&1 | grep -v "^WARNING" || true

# The agent clients of tests/server/test_agent_sdk_clients.py: the OpenAI Agents
# SDK, LangChain's OpenAI chat model and pydantic. Their wheels (and their
# dependencies') are kept in ~/.cache/ferrox/wheels/agents, so CI downloads them
# once; unlike the line above, a failure here stops CI, since that test imports
# them without a skip.
agent_wheels="${FERROX_CACHE_DIR:-$HOME/.cache/ferrox}/wheels/agents"
agent_pkgs=(openai-agents langchain-openai pydantic)
# `pip wheel` has no --root-user-action (an install option): it fails on it.
pip_quiet=(-q --disable-pip-version-check)
pip_install=(install "${pip_quiet[@]}" --root-user-action=ignore)
if ! python3 -m pip "${pip_install[@]}" --no-index --find-links "$agent_wheels" \
  "${agent_pkgs[@]}" 2>/dev/null; then
  python3 -m pip wheel "${pip_quiet[@]}" --wheel-dir "$agent_wheels" "${agent_pkgs[@]}"
  python3 -m pip "${pip_install[@]}" --no-index --find-links "$agent_wheels" "${agent_pkgs[@]}"
fi
