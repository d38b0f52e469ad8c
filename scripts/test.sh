#!/usr/bin/env bash
# The one command that builds goro and runs its tests (g++, Release -O2,
# -Werror; unit tests, compile-fail, link, package and example tests).
# Safe on a fresh checkout: installs missing packages first. Build: build/test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
cmake --workflow --preset test
