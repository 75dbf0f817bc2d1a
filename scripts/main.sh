#!/usr/bin/env bash
# The main job: set up, build (release) and train flambeau-gpt on the fortunes corpus
# (a few minutes on 2 cores), then sample a few fortunes from the checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target flambeau-gpt
gpt=./build/release/flambeau-gpt
$gpt train --config examples/gpt/fortunes.conf
$gpt sample --config examples/gpt/fortunes.conf --num_samples 4
echo "checkpoint: out/gpt/ckpt.safetensors  loss plot: out/gpt/loss.svg  log: out/gpt/log.jsonl"
