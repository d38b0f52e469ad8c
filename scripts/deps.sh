#!/usr/bin/env bash
# Installs the Debian 12 packages a goro workflow needs; does nothing (and
# needs no network) when they are all present.
#   scripts/deps.sh test   build and run the tests (cmake --workflow --preset test)
#   scripts/deps.sh demo   + examples and benchmarks against Go, Boost.Fiber, oneTBB
#   scripts/deps.sh ci     + everything .ci/run uses (meson, clang + sanitizers,
#                          aarch64 and riscv64 cross compilers and qemu, clang-format)
#   scripts/deps.sh windows + MinGW-w64 and Wine for the Windows x64 build
#                          (.ci/run's windows step: docs/platforms.md)
set -euo pipefail

test_pkgs=(cmake ninja-build g++ catch2 python3)
demo_pkgs=(golang-go libboost-fiber-dev libboost-context-dev libtbb-dev hyperfine wrk)
ci_pkgs=(gdb gdb-multiarch meson clang libclang-rt-14-dev clang-format g++-aarch64-linux-gnu g++-riscv64-linux-gnu qemu-user)
windows_pkgs=(cmake ninja-build catch2 python3 g++-mingw-w64-x86-64-posix wine64 wine)

case "${1:-}" in
  test) want=("${test_pkgs[@]}") ;;
  demo) want=("${test_pkgs[@]}" "${demo_pkgs[@]}") ;;
  ci) want=("${test_pkgs[@]}" "${ci_pkgs[@]}") ;;
  windows) want=("${windows_pkgs[@]}") ;;
  *)
    echo "usage: $0 test|demo|ci|windows" >&2
    exit 2
    ;;
esac

missing=()
for pkg in "${want[@]}"; do
  dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed' || missing+=("$pkg")
done
((${#missing[@]} == 0)) && exit 0

echo "deps.sh: installing ${missing[*]}"
sudo=()
((EUID == 0)) || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
