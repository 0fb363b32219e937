#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 and runs each for a bounded time
# (seconds, default 60) on its committed corpus. A finding fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build=build/fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFERROX_WERROR=ON -DFERROX_FUZZ=ON -DFERROX_CUDA=OFF \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
ninja -C "$build" fuzz_dequant fuzz_gguf fuzz_template fuzz_grammar fuzz_json_schema fuzz_chat_parse
# target name -> its committed seed corpus
declare -A corpora=([fuzz_dequant]=tests/quant/fuzz_corpus [fuzz_gguf]=tests/gguf/fuzz_corpus
                    [fuzz_template]=tests/template/fuzz_corpus [fuzz_grammar]=tests/grammar/fuzz_corpus
                    [fuzz_json_schema]=tests/grammar/fuzz_corpus_json_schema
                    [fuzz_chat_parse]=tests/chat_format/fuzz_corpus)
# target name -> its dictionary of tokens worth splicing in
declare -A dictionaries=([fuzz_template]=tests/template/fuzz_template.dict)
# llama.cpp's own grammars join fuzz_grammar's seeds when the sdist is cached (not committed).
sdist="$HOME/.cache/ferrox/sdist/llama_cpp_python-0.3.36.tar.gz"
if [[ -f "$sdist" ]]; then
  mkdir -p "$build/corpus-fuzz_grammar"
  tar -xzf "$sdist" -C "$build/corpus-fuzz_grammar" --strip-components=4 --wildcards \
    '*/vendor/llama.cpp/grammars/*.gbnf' 2>/dev/null || true
fi
for target in "${!corpora[@]}"; do
  work="$build/corpus-$target"   # new inputs land here; the committed corpus stays read-only
  mkdir -p "$work"
  echo "$target: ${seconds}s"
  dict=()
  [[ -n "${dictionaries[$target]:-}" ]] && dict=(-dict="${dictionaries[$target]}")
  "$build/bin/$target" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -timeout=10 \
    "${dict[@]}" -print_final_stats=1 "$work" "${corpora[$target]}" 2>&1 | tail -4
done
