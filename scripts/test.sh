#!/usr/bin/env bash
# Every test: set up (which also installs the Python package), then build and run the
# GoogleTest suite in the release preset and under AddressSanitizer +
# UndefinedBehaviorSanitizer (asan preset), a short fuzz run of the safetensors header
# parser, then the Python tests against PyTorch 2.13. GoogleTest runs once more in one
# process in shuffled order, and pytest once in file order and twice shuffled; the seeds are
# printed (replay: flambeau_tests --gtest_shuffle --gtest_random_seed=N, pytest --shuffle-seed N).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for preset in release asan; do
  echo "== $preset: build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  echo "== $preset: test"
  ctest --preset "$preset" -j 2
  if [ "$preset" = release ]; then
    seed=$((RANDOM % 10000 + 1))
    echo "== release: all tests in one process, shuffled (--gtest_random_seed=$seed)"
    ./build/release/flambeau_tests --gtest_shuffle --gtest_random_seed="$seed" --gtest_brief=1
  fi
done
echo "== fuzz: safetensors header smoke"
bash scripts/fuzz.sh 2>&1 | tail -n 20
echo "== python: test"
# Run from tests/ so that `import flambeau` finds the installed package, not python/.
(cd tests/python && ../../.venv/bin/python -m pytest -q -p no:cacheprovider .)
for seed in $((RANDOM % 10000 + 1)) $((RANDOM % 10000 + 10001)); do
  echo "== python: test, shuffled (--shuffle-seed $seed)"
  (cd tests/python && ../../.venv/bin/python -m pytest -q -p no:cacheprovider --shuffle-seed "$seed" .)
done
