// A C++ symbol's readable name, for the goroutine dump's symbolizers
// (symbolize.hpp for ELF, symbolize_pe.hpp for PE/COFF).
#pragma once

#include <cxxabi.h>

#include <cstdlib>
#include <string>

namespace goro::detail {

// abi::__cxa_demangle's name, or the symbol as it is (a C name, or one it
// cannot parse).
inline std::string demangle(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (status != 0 || !d) return mangled;
  std::string s(d);
  std::free(d);
  return s;
}

}  // namespace goro::detail
