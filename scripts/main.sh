#!/usr/bin/env bash
# The main job: set up, build (release) and run the demo program.
# (The GPT trainer replaces the demo once it exists.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target flambeau-demo
./build/release/flambeau-demo
