#!/usr/bin/env bash
# Every test: set up, then build and run the GoogleTest suite in the release preset and
# under AddressSanitizer + UndefinedBehaviorSanitizer (asan preset).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for preset in release asan; do
  echo "== $preset: build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  echo "== $preset: test"
  ctest --preset "$preset" -j 2
done
