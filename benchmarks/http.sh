#!/usr/bin/env bash
# HTTP "hello" on goro::net vs the same responder in Go (package net, not
# net/http): wrk -d 5s -c 256 on loopback at 1 and 2 procs. Prints
# requests/s and p99 latency per run. Skips cleanly (exit 0) without wrk
# or go. Usage: benchmarks/http.sh [build-dir]   (default build/test;
# the example goro_example_http_hello must be built there).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/test}
if ! command -v wrk >/dev/null; then echo "http.sh: wrk not installed (apt-get install wrk): skipped"; exit 0; fi
if ! command -v go >/dev/null; then echo "http.sh: go not installed: skipped"; exit 0; fi
goro_bin=$build/examples/goro_example_http_hello
[[ -x $goro_bin ]] || { echo "http.sh: $goro_bin not built: skipped"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd benchmarks/peers/go && go build -o "$tmp/go_http_hello" http_hello.go)

bench() {  # name procs command...
  local name=$1 procs=$2; shift 2
  "$@" & local pid=$!
  sleep 0.5
  local out
  out=$(wrk -t 2 -c 256 -d 5s --latency "http://127.0.0.1:$port/" 2>&1) || true
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  local rps p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  printf '%-6s procs=%s  requests/s=%-12s p99=%s\n' "$name" "$procs" "${rps:-?}" "${p99:-?}"
}

port=18080
for procs in 1 2; do
  port=$((port + 1)); bench goro "$procs" env GORO_MAXPROCS="$procs" "$goro_bin" --serve "$port"
  port=$((port + 1)); bench go "$procs" "$tmp/go_http_hello" -port "$port" -procs "$procs"
done
