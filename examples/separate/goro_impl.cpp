// Separate compilation: the one file of the program that compiles goro's
// runtime (the scheduler, sysmon, the goroutine dump, the tracer). Every
// file, this one included, is compiled with -DGORO_SEPARATE_COMPILATION.
#define GORO_IMPLEMENTATION
#include <goro/goro.hpp>
