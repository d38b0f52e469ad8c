// An object that includes goro, compiled with -fcf-protection=full (the
// default of Ubuntu's compilers): goro's target must leave its note with
// IBT but without SHSTK (checked by check.cmake with readelf -n).
#include <goro/goro.hpp>

int goro_cet_probe() {
  goro::runtime rt{goro::options{1}};
  return rt.run([] { return 1; });
}
