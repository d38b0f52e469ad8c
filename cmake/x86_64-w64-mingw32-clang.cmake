# Cross build for Windows x64 with Clang targeting MinGW-w64, on the same
# libraries as cmake/x86_64-w64-mingw32.cmake (Debian's MinGW-w64 GCC,
# posix threads: its libstdc++, libgcc and winpthreads); binaries run
# under Wine.
#   apt-get install clang g++-mingw-w64-x86-64-posix wine64 wine
# What makes Clang's objects link against GCC's runtime: GCC's include and
# library folders named by hand (Debian's clang does not look for a MinGW
# GCC); -femulated-tls, since MinGW GCC keeps thread_local variables
# (libstdc++'s own too, e.g. std::call_once's) in emulated TLS; and GCC's
# type_info macros (below).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(GORO_MINGW_TRIPLE x86_64-w64-mingw32)
file(GLOB GORO_MINGW_GCC_DIR LIST_DIRECTORIES true /usr/lib/gcc/${GORO_MINGW_TRIPLE}/*-posix)
if(NOT GORO_MINGW_GCC_DIR)
  message(FATAL_ERROR "MinGW-w64 GCC (posix) not found under /usr/lib/gcc/${GORO_MINGW_TRIPLE}: "
                      "apt-get install g++-mingw-w64-x86-64-posix")
endif()
list(GET GORO_MINGW_GCC_DIR 0 GORO_MINGW_GCC_DIR)

set(CMAKE_C_COMPILER clang)
set(CMAKE_CXX_COMPILER clang++)
set(CMAKE_C_COMPILER_TARGET ${GORO_MINGW_TRIPLE})
set(CMAKE_CXX_COMPILER_TARGET ${GORO_MINGW_TRIPLE})
set(CMAKE_RC_COMPILER ${GORO_MINGW_TRIPLE}-windres)
set(CMAKE_SYSROOT /usr/${GORO_MINGW_TRIPLE})

# The compile flags are in the windows-clang preset's CMAKE_CXX_FLAGS (a
# preset's flags replace a toolchain's *_FLAGS_INIT); without the preset,
# add them to CMAKE_CXX_FLAGS:
#   -femulated-tls -D__GXX_TYPEINFO_EQUALITY_INLINE=0 -D__GXX_MERGED_TYPEINFO_NAMES=0
# The two macros are what MinGW GCC predefines: libstdc++'s
# type_info::operator== is then its out-of-line one, not a second inline
# copy that collides with it at link time.
set(CMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES
    ${GORO_MINGW_GCC_DIR}/include/c++ ${GORO_MINGW_GCC_DIR}/include/c++/${GORO_MINGW_TRIPLE}
    ${GORO_MINGW_GCC_DIR}/include/c++/backward)
# Everything linked statically, as with GCC. The libraries GCC's driver
# adds by itself are named here; the linker's "duplicate section ... has
# different size" notes (COMDAT type-name strings that Clang and GCC lay
# out differently) are harmless.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -B${GORO_MINGW_GCC_DIR} -L${GORO_MINGW_GCC_DIR} -fuse-ld=bfd")
# Both a cache entry and a normal variable: CMake's Windows-GNU platform
# file sets the cache entry to its own list (kernel32, user32, ...) unless
# one exists, and before policy CMP0126 (cmake_minimum_required < 3.21,
# as in benchmarks/) that set also drops a normal variable of the name.
set(GORO_MINGW_CLANG_STD_LIBS "-Wl,--start-group -lstdc++ -lwinpthread -lsynchronization -lws2_32 -Wl,--end-group")
set(CMAKE_CXX_STANDARD_LIBRARIES "${GORO_MINGW_CLANG_STD_LIBS}" CACHE STRING "Libraries linked into every C++ program")
set(CMAKE_CXX_STANDARD_LIBRARIES "${GORO_MINGW_CLANG_STD_LIBS}")

find_program(GORO_WINE NAMES wine64 wine PATHS /usr/lib/wine REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${GORO_WINE})

set(CMAKE_FIND_ROOT_PATH /usr/${GORO_MINGW_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
