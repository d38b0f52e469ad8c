// Memory for goroutine stacks: reserving and committing, guard regions,
// returning pages to the system (Go's sysAlloc / sysFree / sysUnused /
// sysFault, mem_windows.go). The contract is linux/stack_memory.hpp's.
//
// Windows charges committed memory against the commit limit (RAM plus the
// page file) when it is committed, not when it is touched: a slab of
// stacks costs its whole size there, less its guard regions, which are
// decommitted but for a 32 KiB zone each (guard_with_protection).
// Physical pages are still only used when touched.
#pragma once

#include <climits>
#include <cstddef>

#include "windows_h.hpp"

namespace goro::detail::os {

inline std::size_t page_size() noexcept {
  static const std::size_t p = [] {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    return static_cast<std::size_t>(si.dwPageSize);
  }();
  return p;
}

// bytes (a multiple of the page size) of zeroed, readable and writable
// memory, reserved and committed; nullptr on failure (also when the
// commit limit is reached). Addresses are 64 KiB aligned (the system's
// allocation granularity).
inline void* map_memory(std::size_t bytes) noexcept {
  return VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

// The same for a slab of goroutine stacks (Windows has no MAP_NORESERVE:
// see the header comment).
inline void* map_stack_memory(std::size_t bytes) noexcept { return map_memory(bytes); }

// Gives back a whole mapping from map_memory / map_stack_memory: p must be
// what they returned (VirtualFree releases whole reservations only).
inline void unmap_memory(void* p, std::size_t) noexcept { VirtualFree(p, 0, MEM_RELEASE); }

// Drops the contents of [p, p + bytes) (page-aligned) and gives the pages
// back: decommitted, then committed again, so the range stays usable and
// reads as zeros (MEM_RESET would keep the old contents until the system
// reuses the pages). The range must not hold a guard region.
inline void release_pages(void* p, std::size_t bytes) noexcept {
  if (VirtualFree(p, bytes, MEM_DECOMMIT)) VirtualAlloc(p, bytes, MEM_COMMIT, PAGE_READWRITE);
}

// Windows has no guard marker that leaves a region's bookkeeping alone
// (Linux's MADV_GUARD_INSTALL); guard_with_protection is the way.
inline bool guard_with_marker(void*, std::size_t) noexcept { return false; }
inline bool guard_markers_available() noexcept { return false; }

// The top of every guard region (the part just below the stack it
// guards): the stack-overflow report's own stack. Windows dispatches an
// exception on the faulting stack itself, which an overflow has used up,
// so the first touch below a goroutine's stack must leave room for the
// dispatcher's frame (a CONTEXT and an EXCEPTION_RECORD, ~1.5 KiB), the
// vectored handler and the report: the zone's highest page is committed
// PAGE_GUARD (a one-shot alarm: the first access raises
// STATUS_GUARD_PAGE_VIOLATION and leaves the page readable and writable),
// the pages below it plain committed memory where that runs
// (os/windows/signals.hpp). Windows code probes every page of a frame
// larger than a page in order (___chkstk_ms / __chkstk), so an overflow
// always touches the guard page first, however large the frame.
inline constexpr std::size_t guard_report_zone = 32 * 1024;

// Makes [p, p + bytes) fault on any access: decommitted (cheaper than
// PAGE_NOACCESS: the pages no longer count against the commit limit), but
// for its top guard_report_zone bytes, kept committed with the highest
// page PAGE_GUARD (above). The zone is re-armed by nothing: its page
// fires only on an overflow, which the report ends the process for.
inline bool guard_with_protection(void* p, std::size_t bytes) noexcept {
  const std::size_t page = page_size();
  if (bytes < guard_report_zone + page) return VirtualFree(p, bytes, MEM_DECOMMIT) != 0;
  const std::size_t low = bytes - guard_report_zone;
  if (!VirtualFree(p, low, MEM_DECOMMIT)) return false;
  DWORD old = 0;
  return VirtualProtect(static_cast<char*>(p) + bytes - page, page, PAGE_READWRITE | PAGE_GUARD, &old) != 0;
}

// How many regions the process may have: Windows has no limit like Linux's
// vm.max_map_count (its address-space descriptors grow as needed), so
// guard regions are bounded only by address space and the commit limit.
inline long max_memory_mappings() noexcept { return LONG_MAX / 2; }

}  // namespace goro::detail::os
