#!/usr/bin/env bash
# The installable package: `cmake --install` of the release build into build/install, then two
# projects against the installed tree only: the example extension (C, the stable header
# alone) and a C++ consumer (find_package(flambeau)) that loads it and checks its op.
# Needs a release build (cmake --build --preset release).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$PWD/build/install"
rm -rf "$prefix" build/example-extension build/consumer
cmake --install build/release --prefix "$prefix" >/dev/null
for project in example-extension:examples/extension consumer:examples/consumer; do
  dir="build/${project%%:*}"
  cmake -S "${project#*:}" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$dir"
done
timeout 120 ./build/consumer/flambeau_consumer build/example-extension/libflambeau_example.so
