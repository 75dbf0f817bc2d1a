#!/usr/bin/env bash
# Every test (the default, what .ci/run does): set up (which also installs the Python
# package), then build and run the GoogleTest suite in the release preset and under
# AddressSanitizer + UndefinedBehaviorSanitizer (asan preset), a short fuzz run of the
# safetensors header parser, then the Python tests against PyTorch 2.13. After the release
# tests, scripts/package_test.sh installs the package and builds two projects against it.
# GoogleTest runs once more in one process in shuffled order, and pytest once in file order
# and twice shuffled; the
# seeds are printed (replay: flambeau_tests --gtest_shuffle --gtest_random_seed=N,
# pytest --shuffle-seed N).
#
# scripts/test.sh --quick: the inner loop, after one full run or scripts/setup.sh. Builds and
# runs GoogleTest in release, reinstalls the Python package (incremental) and runs pytest once
# in file order. No setup, sanitizers, fuzzing or shuffled runs.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
pytest_run() { .venv/bin/python -m pytest -q -p no:cacheprovider "$@" tests/python; }

if [ "$quick" = 1 ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "test.sh --quick: no .venv; run bash scripts/setup.sh (or scripts/test.sh) once first" >&2
    exit 1
  fi
  echo "== release: build"
  cmake --preset release >/dev/null
  cmake --build --preset release
  echo "== release: test"
  ctest --preset release -j 2
  echo "== python: install the package (incremental), test"
  .venv/bin/python -m pip install -q --no-build-isolation .
  pytest_run
  exit 0
fi

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
    echo "== package: cmake --install, the example extension and a C++ consumer against it"
    bash scripts/package_test.sh
  fi
done
echo "== fuzz: safetensors header smoke"
bash scripts/fuzz.sh 2>&1 | tail -n 20
echo "== python: test"
pytest_run
for seed in $((RANDOM % 10000 + 1)) $((RANDOM % 10000 + 10001)); do
  echo "== python: test, shuffled (--shuffle-seed $seed)"
  pytest_run --shuffle-seed "$seed"
done
