# Cross build for Windows x64 with Debian's MinGW-w64 GCC (the posix
# threads variant: std::thread and std::mutex need winpthreads); binaries
# run under Wine (ctest prefixes it; the windows test preset sets a
# throwaway WINEPREFIX under the build folder and silences Wine's logs).
#   apt-get install g++-mingw-w64-x86-64-posix wine64 wine
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc-posix)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)

# Everything linked statically (libstdc++, libgcc, winpthreads): the
# programs then need no MinGW DLL beside them, under Wine or on Windows.
set(CMAKE_EXE_LINKER_FLAGS_INIT -static)

# Debian's wine64 package installs the loader as /usr/lib/wine/wine64;
# its wine package adds /usr/bin/wine.
find_program(GORO_WINE NAMES wine64 wine PATHS /usr/lib/wine REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${GORO_WINE})

set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# Packages may come from the host: tests/CMakeLists.txt takes Catch2's
# single header from the host without its /usr/include include path.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
