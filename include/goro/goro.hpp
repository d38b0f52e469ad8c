// goro: Go's goroutine scheduler (the G/M/P model) as a header-only C++20
// library. Include this header; compile with -std=c++20 -pthread.
#pragma once

#include "blocking.hpp"
#include "chan.hpp"
#include "clock.hpp"
#include "context.hpp"
#include "dump.hpp"
#include "error.hpp"
#include "group.hpp"
#include "lane.hpp"
#include "policy.hpp"
#include "runtime.hpp"
#include "select.hpp"
#include "stack.hpp"
#include "sync.hpp"
#include "time.hpp"
#include "trace.hpp"

// Last, so that every header the rest shares is already in (the
// amalgamation inlines each header where it is first included).
#include "net.hpp"
#include "signal.hpp"
