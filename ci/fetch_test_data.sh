#!/usr/bin/env bash
# Extracts llama.cpp's vocab-only test GGUFs (and their .inp/.out token lists,
# made with HF tokenizers) from the llama-cpp-python sdist into a cache folder.
# They are not our files, so they are never committed. Idempotent and quiet.
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${FERROX_CACHE_DIR:-$HOME/.cache/ferrox}"
sdist_dir="$cache/sdist"
vocab_dir="$cache/vocab"
sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"
# With .inp/.out (Hugging Face's ids for the .inp strings): the list the tests
# share, one per tokenizer family ferrox runs.
mapfile -t vocabs < <(grep -v '^#' "$(dirname "$0")/../tests/tokenizer/vocab_files.txt")
# Vocabularies only (no .inp/.out): gpt-neox has no tokenizer.ggml.pre key (the
# "default" split, with a warning); deepseek-llm names a split ferrox refuses.
plain_vocabs=(gpt-neox deepseek-llm)

missing=0
for v in "${vocabs[@]}"; do
  for f in "ggml-vocab-$v.gguf" "ggml-vocab-$v.gguf.inp" "ggml-vocab-$v.gguf.out"; do
    [[ -s "$vocab_dir/$f" ]] || missing=1
  done
done
for v in "${plain_vocabs[@]}"; do
  [[ -s "$vocab_dir/ggml-vocab-$v.gguf" ]] || missing=1
done
[[ $missing == 0 ]] && exit 0

if [[ ! -s "$sdist" ]]; then
  mkdir -p "$sdist_dir"
  python3 -m pip download -q --no-binary :all: --no-deps \
    "llama-cpp-python==$version" -d "$sdist_dir"
fi

mkdir -p "$vocab_dir"
members=()
for v in "${vocabs[@]}"; do
  for suffix in "" .inp .out; do
    members+=("llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-$v.gguf$suffix")
  done
done
for v in "${plain_vocabs[@]}"; do
  members+=("llama_cpp_python-$version/vendor/llama.cpp/models/ggml-vocab-$v.gguf")
done
tar -xzf "$sdist" -C "$vocab_dir" --strip-components=4 "${members[@]}"
