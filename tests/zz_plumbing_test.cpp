#include <catch2/catch.hpp>
#include <string>
#include <cstdlib>
TEST_CASE("plumbing: helpers dir is defined", "[plumbing]") {
  std::string dir = GORO_HELPERS_DIR;
  REQUIRE(!dir.empty());
  REQUIRE(std::system((std::string(GORO_HELPERS_DIR) + "/goro_helper_zz_plumbing 7").c_str()) == 0);
}
