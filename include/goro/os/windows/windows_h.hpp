// <windows.h> for the Windows OS layer, included the one way: without the
// min/max macros (they break std::numeric_limits<T>::max() and std::min in
// goro and in the program) and without the rarely used parts (winsock 1,
// RPC, the shell). <winsock2.h> (and <mswsock.h>, for the poller's
// SIO_BASE_HANDLE) come first, as Winsock requires; a program that
// includes <windows.h> itself should include <winsock2.h> before it. A
// program that includes <windows.h> first, with other settings, keeps
// them: both macros are only defined when unset.
#pragma once

#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <winsock2.h>  // first: Winsock 2, not <windows.h>'s winsock 1
// (then)
#include <windows.h>
// (then, needing both)
#include <mswsock.h>

// WaitOnAddress (futex.hpp) needs Windows 8; MinGW-w64 targets Windows 10
// unless told otherwise.
#if defined(_WIN32_WINNT) && _WIN32_WINNT < 0x0602
#error "goro: Windows 8 or later is required (WaitOnAddress): define _WIN32_WINNT as 0x0602 or higher"
#endif
