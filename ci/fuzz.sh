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
# One fuzzer per core at a time (each is single-threaded); each one's log is
# printed when it ends, and any finding fails the script.
fuzz_one() {
  local target=$1 work="$build/corpus-$1"   # new inputs land in work; the committed corpus stays read-only
  mkdir -p "$work"
  local dict=()
  [[ -n "${dictionaries[$target]:-}" ]] && dict=(-dict="${dictionaries[$target]}")
  "$build/bin/$target" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -timeout=10 \
    "${dict[@]}" -print_final_stats=1 "$work" "${corpora[$target]}" >"$build/log-$target" 2>&1
}
at_once="${FERROX_JOBS:-$(nproc)}"
failed=()
declare -A running=()
reap() {  # waits for one fuzzer to end, prints its log's tail
  local pid status=0
  wait -n -p pid || status=$?
  local target=${running[$pid]}
  unset "running[$pid]"
  echo "$target: ${seconds}s, exit $status"
  tail -4 "$build/log-$target"
  ((status == 0)) || failed+=("$target")
}
for target in "${!corpora[@]}"; do
  ((${#running[@]} < at_once)) || reap
  fuzz_one "$target" &
  running[$!]=$target
done
while ((${#running[@]} > 0)); do reap; done
if ((${#failed[@]} > 0)); then
  echo "fuzzing found something in: ${failed[*]} (logs: $build/log-<target>)" >&2
  exit 1
fi
