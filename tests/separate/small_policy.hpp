// A custom policy used by separate_test.cpp; its scheduler is compiled in
// impl.cpp (GORO_INSTANTIATE_RUNTIME).
#pragma once

#include <goro/goro.hpp>

struct small_policy : goro::default_policy {
  static constexpr std::size_t local_queue_capacity = 64;
  static constexpr std::size_t stack_size = 128 * 1024;
};
