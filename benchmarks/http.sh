#!/bin/sh
# HTTP "hello" on goro::net vs the same responder in Go (package net, not
# net/http), driven by wrk at 1 and 2 procs: a shorthand for
#   benchmarks/run.sh --only http_hello --procs 1,2 [more run.sh flags]
# (requests/s and p99 latency; skipped cleanly without wrk). See README.md.
exec "$(dirname "$0")/run.sh" --only http_hello --procs 1,2 "$@"
