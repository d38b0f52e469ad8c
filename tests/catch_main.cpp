// The one Catch2 main() shared by every tests/<name>_test.cpp executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
