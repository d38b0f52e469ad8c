// The runtime of the programs compiled with GORO_SEPARATE_COMPILATION
// against one implementation (CMake's goro_program_runtime: the test
// helpers always, examples and tests/noexcept with
// GORO_PROGRAMS_SEPARATE_COMPILATION; Meson's helpers).
#define GORO_IMPLEMENTATION
#include <goro/goro.hpp>
