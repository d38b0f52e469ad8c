// dump_lines.cpp built with -flto -g (GCC only: tests/helpers/CMakeLists.txt).
// GCC's link-time optimisation splits the debug information: the units of
// the optimised code name each inlined function by a reference into the
// unit its compile step wrote (DW_FORM_ref_addr), which the dump follows
// to name the frames as without -flto.
#include "dump_lines.cpp"
