// The implementation file of a separately compiled program (SPEC, "Build"):
// the one translation unit that compiles goro's runtime. Every file of the
// program is compiled with -DGORO_SEPARATE_COMPILATION.
#define GORO_IMPLEMENTATION
#include <goro/goro.hpp>

#include "small_policy.hpp"

// A runtime with a policy other than default_policy is instantiated here.
GORO_INSTANTIATE_RUNTIME(small_policy);
