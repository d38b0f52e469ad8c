#!/usr/bin/env bash
# The chaos soak (docs/testing.md): builds the `chaos` preset (-DGORO_CHAOS:
# random delays at the scheduler's protocol points, and the stall monitor)
# and runs, seed after seed, the stress workloads of tests/soak_test.cpp and
# the concurrency tests labelled `soak`, until MINUTES have passed.
#
#   scripts/soak.sh MINUTES            e.g. scripts/soak.sh 60
#
# Environment:
#   SOAK_SEED=n        first seed (default: from the clock); seeds go n, n+1, ...
#   SOAK_TESTS="a b"   the concurrency tests to rotate through (names without
#                      _test; default: every test labelled soak in CMake)
#   SOAK_ROUND_SECONDS=s  how long each soak workload loops per seed (default 2)
#   SOAK_BUILD=0       do not build (use build/chaos as it is)
#   SOAK_TESTS_BIN=x   the test program in build/chaos/tests (default
#                      goro_tests; CI: goro_chan_select_tests, its tests only)
#
# Each seed runs the soak binary and one concurrency test (round-robin), each
# under a 900 s timeout (chaos makes the concurrency tests several times
# slower, a loaded machine more). A failing run's log is kept in
# build/chaos/soak-logs with the command that reproduces it. Exits non-zero
# if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."
minutes=${1:?usage: scripts/soak.sh MINUTES}
build=build/chaos
logs=$build/soak-logs
round_seconds=${SOAK_ROUND_SECONDS:-2}

default_tests="wakeup runtime chan select sync wait_group time net gomaxprocs yield lockdead"
read -r -a tests <<<"${SOAK_TESTS:-$default_tests}"

if [[ ${SOAK_BUILD:-1} != 0 ]]; then
  [[ -f $build/build.ninja ]] || cmake --preset chaos >/dev/null || exit 1
  # goro_tests holds every concurrency test (tests/CMakeLists.txt).
  cmake --build $build --target goro_soak_test goro_tests || exit 1
fi
mkdir -p "$logs"

seed=${SOAK_SEED:-$(( $(date +%s) % 1000000 ))}
first_seed=$seed
deadline=$((SECONDS + minutes * 60))
runs=0 failures=0 rounds=0 cases=0 i=0
failed_runs=()

# run_one NAME SEED CMD...: runs CMD with the seed, logs, counts.
run_one() {
  local name=$1 s=$2
  shift 2
  local log=$logs/seed-$s-$name.log start=$SECONDS rc
  GORO_CHAOS_SEED=$s GORO_SOAK_SECONDS=$round_seconds GORO_SOAK_VERBOSE=1 timeout -s ABRT 900 "$@" >"$log" 2>&1
  rc=$?
  runs=$((runs + 1))
  local r c
  r=$(grep -Eo '^soak: [a-z]+: [0-9]+ rounds' "$log" | awk '{s += $3} END {print s + 0}')
  c=$(grep -Eo '\(([0-9]+) assertions? in ([0-9]+) test cases?\)' "$log" | grep -Eo 'in [0-9]+' | grep -Eo '[0-9]+' | head -1)
  rounds=$((rounds + r))
  cases=$((cases + ${c:-0}))
  if ((rc == 0)); then
    rm -f "$log"
    local what="$c test cases"
    [[ $name == soak ]] && what="$r workload rounds"
    printf '  seed %-8s %-12s ok   %4ss  %s\n' "$s" "$name" $((SECONDS - start)) "$what"
  else
    failures=$((failures + 1))
    failed_runs+=("seed $s $name (exit $rc): $log")
    echo "GORO_CHAOS_SEED=$s GORO_SOAK_SECONDS=$round_seconds $*" >>"$log"
    printf '  seed %-8s %-12s FAIL %4ss  exit %s, log %s\n' "$s" "$name" $((SECONDS - start)) "$rc" "$log"
    grep -E 'stall monitor|FAILED|REQUIRE|CHECK|soak:|goro:' "$log" | head -n 12 | sed 's/^/      | /'
  fi
}

echo "chaos soak: $minutes min, seeds from $first_seed, tests: soak ${tests[*]}"
while ((SECONDS < deadline)); do
  run_one soak "$seed" "$build/tests/goro_soak_test"
  t=${tests[$((i % ${#tests[@]}))]}
  run_one "$t" "$seed" "$build/tests/${SOAK_TESTS_BIN:-goro_tests}" -# "[#${t}_test]~[.]"
  i=$((i + 1))
  seed=$((seed + 1))
done

echo
echo "chaos soak summary: seeds $first_seed..$((seed - 1)) ($((seed - first_seed)) seeds), $runs runs," \
  "$rounds soak workload rounds, $cases test cases, $failures failed, $((SECONDS / 60)) min"
for f in "${failed_runs[@]}"; do echo "  FAILED: $f"; done
((failures == 0))
