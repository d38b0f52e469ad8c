// Memory for goroutine stacks and signal stacks: mapping, guard regions,
// returning pages to the kernel (Go's sysAlloc / sysFree / sysUnused /
// sysFault, mem_linux.go).
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102  // Linux 6.13
#endif

namespace goro::detail::os {

inline std::size_t page_size() noexcept {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// bytes (a multiple of the page size) of zeroed, readable and writable
// memory, committed page by page on first touch; nullptr on failure.
inline void* map_memory(std::size_t bytes) noexcept {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The same for a slab of goroutine stacks, without reserving swap for it
// (MAP_NORESERVE): most of a stack is never touched.
inline void* map_stack_memory(std::size_t bytes) noexcept {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Gives back a whole mapping from map_memory / map_stack_memory.
inline void unmap_memory(void* p, std::size_t bytes) noexcept { munmap(p, bytes); }

// Drops the contents of [p, p + bytes) (page-aligned) and gives the pages
// back to the kernel; the range stays mapped, and guarded if it was, and
// reads as zeros when touched again (Go's sysUnused).
inline void release_pages(void* p, std::size_t bytes) noexcept { madvise(p, bytes, MADV_DONTNEED); }

// Makes [p, p + bytes) fault on any access without splitting the mapping
// (a guard marker: madvise(MADV_GUARD_INSTALL)); true on success. Only
// where guard_markers_available().
inline bool guard_with_marker(void* p, std::size_t bytes) noexcept {
  return madvise(p, bytes, MADV_GUARD_INSTALL) == 0;
}

// The same by protection (PROT_NONE); each call splits a mapping, which
// counts against max_memory_mappings().
inline bool guard_with_protection(void* p, std::size_t bytes) noexcept { return mprotect(p, bytes, PROT_NONE) == 0; }

// Whether guard markers work here, probed once: the call must succeed and
// the kernel must then refuse to read the page (EFAULT). The second check
// matters under qemu-user, which answers 0 to advice it does not implement.
inline bool guard_markers_available() noexcept {
  static const bool works = [] {
    const std::size_t page = page_size();
    void* p = map_memory(page);
    if (!p) return false;
    bool ok = false;
    int fds[2];
    if (guard_with_marker(p, page) && pipe2(fds, O_CLOEXEC) == 0) {
      ok = ::write(fds[1], p, 1) < 0 && errno == EFAULT;
      close(fds[0]);
      close(fds[1]);
    }
    unmap_memory(p, page);
    return ok;
  }();
  return works;
}

// How many mappings the process may have (vm.max_map_count; 65,530 if it
// cannot be read).
inline long max_memory_mappings() noexcept {
  long max_maps = 65530;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    if (std::fscanf(f, "%ld", &max_maps) != 1) max_maps = 65530;
    std::fclose(f);
  }
  return max_maps;
}

}  // namespace goro::detail::os
