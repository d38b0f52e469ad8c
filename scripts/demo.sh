#!/usr/bin/env bash
# Builds the examples and benchmarks (preset demo, build/demo), runs every
# example, then the quick benchmark suite when benchmarks/run.sh exists.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh demo
cmake --workflow --preset demo

shopt -s nullglob
for exe in build/demo/examples/goro_example_*; do
  [[ -x $exe ]] || continue
  echo "=== ${exe##*/goro_example_} ==="
  "$exe"
done

if [[ -f benchmarks/run.sh ]]; then
  echo "=== benchmarks (quick) ==="
  GORO_BUILD_DIR=build/demo bash benchmarks/run.sh --quick
fi
