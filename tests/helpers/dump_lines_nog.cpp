// dump_lines.cpp built without debug information (-g0, tests/helpers/
// CMakeLists.txt): the dump must show no file:line of it, and not fail.
#include "dump_lines.cpp"
