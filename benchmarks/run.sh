#!/bin/sh
# Build and run the goro benchmarks against the installed peers; see README.md.
#   benchmarks/run.sh [--quick] [--rounds R] [--only WORKLOAD] [--procs 1,2]
exec python3 "$(dirname "$0")/run.py" "$@"
