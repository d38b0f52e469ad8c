#!/usr/bin/env bash
# Compile time of a 3-line goro program (run + go) at -O2, against a
# translation unit that includes the same standard and system headers and
# nothing else: header-only, and with separate compilation (the user's file
# only; the implementation file is compiled once per program). Builds
# alternate within each round; prints medians of user CPU seconds and their
# ratios to the standard-headers TU.
#
#   benchmarks/compile_time.sh [ROUNDS]   (default 5; CXX to pick the compiler)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
cxx=${CXX:-g++}
inc=$PWD/include
dir=$(mktemp -d /tmp/goro-compile-time.XXXXXX)
trap 'rm -rf "$dir"' EXIT

cat >"$dir/prog.cpp" <<'EOF'
#include <goro/goro.hpp>
int main() { goro::run([] { goro::go([] {}); }); }
EOF
printf '#define GORO_IMPLEMENTATION\n#include <goro/goro.hpp>\n' >"$dir/impl.cpp"
# Every <...> header the library includes that this system has (the
# Windows port's <windows.h>, <io.h>, ... are not on Linux).
{
  grep -rho --include='*.hpp' '^#include <[^>]*>' include/goro | sort -u |
    sed 's/^#include \(<[^>]*>\)/#if __has_include(\1)\n#include \1\n#endif/'
  echo 'int main() {}'
} >"$dir/std.cpp"
# A standard-headers TU that does not compile would make every ratio meaningless.
"$cxx" -std=c++20 -O2 -c "$dir/std.cpp" -o "$dir/std.o"

# user CPU seconds of one compile
secs() {
  local t
  t=$({ /usr/bin/time -f '%U' "$cxx" -std=c++20 -O2 -I"$inc" "$@" -o "$dir/out.o" -c; } 2>&1 >/dev/null | tail -n 1)
  echo "$t"
}

declare -a std_t header_t sep_t impl_t
for ((r = 0; r < rounds; r++)); do
  std_t+=("$(secs "$dir/std.cpp")")
  header_t+=("$(secs "$dir/prog.cpp")")
  sep_t+=("$(secs -DGORO_SEPARATE_COMPILATION "$dir/prog.cpp")")
  impl_t+=("$(secs -DGORO_SEPARATE_COMPILATION "$dir/impl.cpp")")
done

# The user file of a separate build must not contain the runtime.
"$cxx" -std=c++20 -O2 -I"$inc" -DGORO_SEPARATE_COMPILATION -c "$dir/prog.cpp" -o "$dir/user.o"
if nm -C --defined-only "$dir/user.o" | grep -q 'scheduler<'; then
  echo "goro: the separately compiled user file contains the scheduler" >&2
  exit 1
fi

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
s=$(median "${std_t[@]}")
h=$(median "${header_t[@]}")
p=$(median "${sep_t[@]}")
i=$(median "${impl_t[@]}")
echo "compile time at -O2 ($cxx, $rounds rounds, median user seconds)"
printf '  %-42s %6.2f s\n' "standard headers only" "$s"
printf '  %-42s %6.2f s  %5.2fx\n' "header-only (run + go)" "$h" "$(awk -v a="$h" -v b="$s" 'BEGIN {print a / b}')"
printf '  %-42s %6.2f s  %5.2fx\n' "separate compilation, user file" "$p" "$(awk -v a="$p" -v b="$s" 'BEGIN {print a / b}')"
printf '  %-42s %6.2f s  %5.2fx\n' "separate compilation, implementation file" "$i" "$(awk -v a="$i" -v b="$s" 'BEGIN {print a / b}')"
