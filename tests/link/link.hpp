// Functions of the link test; each runs its own goro runtime and returns a
// checksum (see main.cpp for the expected values).
#pragma once

int link_a();    // a.cpp, in the executable
int link_b();    // b.cpp, in the executable
int link_lib();  // lib.cpp, in the shared library goro_link_lib
