# Cross build for Linux RISC-V 64 (rv64gc, LP64D: the compiler's default)
# with Debian's cross compiler; binaries run under qemu-user (binfmt is not
# needed: ctest prefixes the emulator).
#   apt-get install g++-riscv64-linux-gnu qemu-user
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)

set(CMAKE_C_COMPILER riscv64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER riscv64-linux-gnu-g++)

set(GORO_RISCV64_SYSROOT /usr/riscv64-linux-gnu)
find_program(GORO_QEMU_RISCV64 qemu-riscv64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${GORO_QEMU_RISCV64} -L ${GORO_RISCV64_SYSROOT})

set(CMAKE_FIND_ROOT_PATH ${GORO_RISCV64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
# Packages may come from the host: header-only ones (goro's own install in
# the package test) work as they are; tests/CMakeLists.txt takes Catch2's
# single header from the host without its /usr/include include path.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
