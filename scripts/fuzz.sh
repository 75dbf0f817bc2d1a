#!/usr/bin/env bash
# Builds the libFuzzer target for the safetensors header parser (clang, ASan + UBSan)
# and runs it from a fresh seed corpus of valid and broken files.
#   scripts/fuzz.sh                 # smoke: 100000 executions (CI)
#   scripts/fuzz.sh -runs=1000000   # any libFuzzer flags replace the default
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=clang++ cmake -S fuzz -B build/fuzz -G Ninja >/dev/null
cmake --build build/fuzz
rm -rf build/fuzz/corpus && python3 fuzz/make_seeds.py build/fuzz/corpus
[ $# -gt 0 ] || set -- -runs=100000
build/fuzz/safetensors_header_fuzz -dict=fuzz/safetensors.dict -max_len=4096 -timeout=10 \
  -print_final_stats=1 "$@" build/fuzz/corpus
