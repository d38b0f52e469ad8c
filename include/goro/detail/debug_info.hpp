// What a debugger needs to find the goroutines of a stopped process or a
// core file (tools/goro-gdb.py): one global symbol, goro_v0_1_debug, with
// C linkage and a self-describing layout, so the gdb script needs no debug
// information for goro's own types and survives changes of the G record:
//
//   goro_v0_1_debug.magic / version   what follows (version 1: this struct)
//   .g_size, .off_*                   the G record's size and field offsets
//   .frame_size                       the switch frame's size (context.hpp)
//   .wait_reasons, .n_wait_reasons    the names of wait_reason's values
//   .blocks                           every block of G records of every
//                                     runtime alive (a singly linked list)
//
// A runtime adds each block of G records as it allocates it and removes
// its blocks before freeing them (sched.hpp). The list is changed under
// its own lock, off every hot path (once per 32 spawned records).
//
// The header also registers the gdb script in .debug_gdb_scripts
// (gdb_script.hpp), so gdb offers to load it with the program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "context.hpp"
#include "g.hpp"
#include "gdb_script.hpp"
#include "memory.hpp"
#include "wait_reason.hpp"

extern "C" {
struct goro_v0_1_debug_block {
  goro_v0_1_debug_block* next;
  void* gs;              // the first G record of the block
  std::uint64_t count;   // records in the block
  const void* runtime;   // the sched_base that owns it
};

struct goro_v0_1_debug_info {
  std::uint32_t magic;  // 0x676f726f ("goro")
  std::uint32_t version;
  std::uint32_t g_size;
  std::uint32_t off_sp, off_status, off_id, off_waiting_on, off_wait_since, off_created_pc;
  std::uint32_t off_stack_lo, off_stack_size, off_is_main;
  std::uint32_t frame_size;  // switch_frame
  std::uint32_t n_wait_reasons;
  const char* const* wait_reasons;
  goro_v0_1_debug_block* volatile blocks;
};
}

namespace goro::detail {

inline std::mutex& debug_blocks_lock() {
  static std::mutex* m = new std::mutex;  // leaked: runtimes may end during static destruction
  return *m;
}

}  // namespace goro::detail

extern "C" {
// Default visibility: one anchor per process even when several shared
// objects use goro (the dynamic linker binds them all to the first).
[[gnu::used, gnu::visibility("default")]] inline goro_v0_1_debug_info goro_v0_1_debug = {
    0x676f726fu,
    1,
    sizeof(goro::detail::g),
    offsetof(goro::detail::g, sp),
    offsetof(goro::detail::g, status),
    offsetof(goro::detail::g, id),
    offsetof(goro::detail::g, waiting_on),
    offsetof(goro::detail::g, wait_since),
    offsetof(goro::detail::g, created_pc),
    offsetof(goro::detail::g, stack) + offsetof(goro::stack_memory, lo),
    offsetof(goro::detail::g, stack) + offsetof(goro::stack_memory, size),
    offsetof(goro::detail::g, is_main),
    sizeof(goro::detail::switch_frame),
    sizeof(goro::detail::wait_reason_names) / sizeof(goro::detail::wait_reason_names[0]),
    goro::detail::wait_reason_names,
    nullptr,
};
}

namespace goro::detail {

// Adds a block of `count` G records of runtime rt, its entry from rt's
// allocator `mem` (memory.hpp; may raise bad_alloc: nothing changes then).
inline void debug_add_block(g* gs, std::size_t count, const void* rt, runtime_memory* mem) {
  using block = goro_v0_1_debug_block;
  auto* b = ::new (memory_allocate(mem, sizeof(block), alignof(block))) block{nullptr, gs, count, rt};
  std::lock_guard<std::mutex> lk(debug_blocks_lock());
  b->next = goro_v0_1_debug.blocks;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // filled in before it is linked
  goro_v0_1_debug.blocks = b;
}

// Removes every block of runtime rt (`mem`: as given to debug_add_block).
inline void debug_remove_blocks(const void* rt, runtime_memory* mem) noexcept {
  std::lock_guard<std::mutex> lk(debug_blocks_lock());
  for (goro_v0_1_debug_block* volatile* link = &goro_v0_1_debug.blocks; *link;) {
    goro_v0_1_debug_block* b = *link;
    if (b->runtime == rt) {
      *link = b->next;
      memory_deallocate(mem, b, sizeof(goro_v0_1_debug_block), alignof(goro_v0_1_debug_block));
    } else {
      link = &b->next;
    }
  }
}

}  // namespace goro::detail
