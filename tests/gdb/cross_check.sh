#!/usr/bin/env bash
# tools/goro-gdb.py on AArch64 or RISC-V 64: tests/helpers/gdb_target.cpp cross-compiled,
# run under qemu-user's gdbstub (qemu-aarch64 -g, qemu-riscv64 -g) and driven by
# gdb-multiarch. The same checks as tests/gdb_test.cpp's live case (which
# cannot attach to a program under qemu-user): `info goroutines` (ids,
# wait reasons, user frames with file:line, the goroutine in a blocking
# call shown through its thread) and `goroutine N bt` (from the park site
# through the goroutine's function, cut at its entry, then `created by`).
#
#   cross_check.sh SOURCE_DIR WORK_DIR CXX QEMU GDB SYSROOT [GDB_ARCH]
#
# CXX: an AArch64 cross compiler (aarch64-linux-gnu-g++), QEMU: qemu-aarch64,
# GDB: gdb-multiarch, SYSROOT: the AArch64 libraries (/usr/aarch64-linux-gnu).
# GDB_ARCH (gdb's `set architecture`, aarch64 by default) runs the same
# checks for another ISA: riscv:rv64 with riscv64-linux-gnu-g++,
# qemu-riscv64 and /usr/riscv64-linux-gnu (test gdb.riscv64).
# The helper stops (a breakpoint) in gdb_main_wait, which it calls after
# every goroutine is parked and it printed their ids.
set -euo pipefail

if (($# != 6 && $# != 7)); then
  echo "usage: $0 SOURCE_DIR WORK_DIR CXX QEMU GDB SYSROOT [GDB_ARCH]" >&2
  exit 2
fi
src=$1 work=$2 cxx=$3 qemu=$4 gdb=$5 sysroot=$6 gdb_arch=${7:-aarch64}
name=${gdb_arch%%:*}_check

mkdir -p "$work"
exe=$work/gdb_target_${gdb_arch%%:*}
# The gdbstub's socket: under /tmp, as a build directory's path may be too
# long for a Unix socket's (108 bytes).
sock_dir=$(mktemp -d "${TMPDIR:-/tmp}/goro-gdb.XXXXXX")
sock=$sock_dir/stub
target_out=$work/target.out
gdb_out=$work/gdb.out
rm -f "$target_out" "$gdb_out"

qemu_pid=
cleanup() {
  if [[ -n $qemu_pid ]]; then
    kill "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
  fi
  rm -rf "$sock_dir"
}
trap cleanup EXIT

# -O1: a little quicker to compile than -O2 (6 s against 8 s here); an -O2
# build passes the same checks.
"$cxx" -std=c++20 -O1 -g -I"$src/include" "$src/tests/helpers/gdb_target.cpp" -o "$exe" -pthread

# A Unix socket, not a TCP port: no port to pick, nothing shared between
# parallel test runs. qemu waits for gdb before the program's first insn.
"$qemu" -L "$sysroot" -g "$sock" "$exe" live >"$target_out" 2>&1 &
qemu_pid=$!
for _ in $(seq 100); do
  [[ -S $sock ]] && break
  kill -0 "$qemu_pid" 2>/dev/null || break
  sleep 0.1
done
if [[ ! -S $sock ]]; then
  echo "$name: qemu's gdbstub socket did not appear" >&2
  cat "$target_out" >&2
  exit 1
fi

timeout 120 "$gdb" -batch -nx \
  -ex "set architecture $gdb_arch" \
  -ex "set sysroot $sysroot" \
  -ex "file $exe" \
  -ex "target remote $sock" \
  -ex 'break gdb_main_wait' \
  -ex continue \
  -ex "source $src/tools/goro-gdb.py" \
  -ex 'info goroutines' \
  -ex 'goroutine all bt' \
  -ex 'kill' >"$gdb_out" 2>&1 || true
cat "$gdb_out"

fail=0
check() {  # check WHAT TEXT NEEDLE: NEEDLE must occur in TEXT
  if [[ $2 != *"$3"* ]]; then
    echo "FAIL: $1: no '$3' in:"
    echo "$2"
    fail=1
  fi
}
check_not() {
  if [[ $2 == *"$3"* ]]; then
    echo "FAIL: $1: '$3' in:"
    echo "$2"
    fail=1
  fi
}

out=$(cat "$gdb_out")
check "gdb stopped at the breakpoint" "$out" "hit Breakpoint 1, "
check "info goroutines header" "$out" "Wait reason"

declare -A id
while read -r word gid fn; do
  [[ $word == goroutine ]] && id[$fn]=$gid
done <"$target_out"

row_of() {  # info goroutines row of goroutine $1
  grep -E "^  $1 +(running|waiting|runnable) " "$gdb_out" | head -n 1 || true
}

for pair in "gdb_park_chan_recv:chan receive" "gdb_park_chan_send:chan send" "gdb_park_select:select" \
  "gdb_park_sleep:sleep" "gdb_park_mutex:sync.Mutex.Lock" "gdb_park_wait_group:sync.WaitGroup.Wait" \
  "gdb_park_cond:sync.Cond.Wait"; do
  fn=${pair%%:*} reason=${pair#*:}
  if [[ -z ${id[$fn]:-} ]]; then
    echo "FAIL: the helper printed no id for $fn:"
    cat "$target_out"
    exit 1
  fi
  row=$(row_of "${id[$fn]}")
  check "$fn's row" "$row" "waiting"
  check "$fn's row" "$row" "$reason"
  check "$fn's row" "$row" "$fn at "
  check "$fn's row" "$row" "gdb_target.cpp:"
done

# The goroutine in a blocking call runs on an M: its thread's frames.
row=$(row_of "${id[gdb_in_blocking_call]:-none}")
check "gdb_in_blocking_call's row" "$row" "running, thread "
check "gdb_in_blocking_call's row" "$row" "gdb_target.cpp:"

# goroutine N bt: from the park site down to the goroutine's closure.
recv=${id[gdb_park_chan_recv]:-none}
bt=$(awk -v head="goroutine $recv [chan receive]:" '$0 == head {on = 1} on {print} on && /^created by / {exit}' \
  "$gdb_out")
check "goroutine $recv bt" "$bt" "#0  "
check "goroutine $recv bt" "$bt" "gdb_park_chan_recv (s=...) at "
check "goroutine $recv bt" "$bt" "tests/helpers/gdb_target.cpp:"
check_not "goroutine $recv bt" "$bt" "goro_v0_1_start"
check "goroutine $recv bt" "$bt" "created by "
check "goroutine $recv bt" "$bt" "gdb_spawner"

if ((fail)); then
  echo "$name: FAILED"
  exit 1
fi
echo "$name: passed"
