// Shared helpers for goro's tests.
#pragma once

#include <goro/goro.hpp>

#if !defined(_WIN32)
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <csignal>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define GORO_TEST_SANITIZED 1
#endif
#endif
#if !defined(GORO_TEST_SANITIZED) && (defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__))
#define GORO_TEST_SANITIZED 1
#endif
#ifndef GORO_TEST_SANITIZED
#define GORO_TEST_SANITIZED 0
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORO_TEST_TSAN 1
#endif
#endif
#if !defined(GORO_TEST_TSAN) && defined(__SANITIZE_THREAD__)
#define GORO_TEST_TSAN 1
#endif
#ifndef GORO_TEST_TSAN
#define GORO_TEST_TSAN 0
#endif

#if defined(_WIN32)
// POSIX's environment setters, for the tests that use them (the C
// runtime's _putenv_s; an empty value removes the variable).
#include <stdlib.h>
inline int setenv(const char* name, const char* value, int) { return _putenv_s(name, value); }
inline int unsetenv(const char* name) { return _putenv_s(name, ""); }
#endif

namespace goro_test {

// Sizes for stress tests: sanitizers (TSan fibers cost ~0.5 ms each) get less.
inline constexpr int scale(int normal, int sanitized) { return GORO_TEST_SANITIZED ? sanitized : normal; }

// Cross builds run under qemu-user (GORO_CROSS_TESTS, tests/CMakeLists.txt),
// 10-50x slower for FP and memory-heavy work: a size for them too.
#ifdef GORO_CROSS_TESTS
inline constexpr bool emulated = true;
#else
inline constexpr bool emulated = false;
#endif
inline constexpr int scale(int normal, int sanitized, int under_emulation) {
  return emulated ? under_emulation : scale(normal, sanitized);
}

struct child_result {
  bool exited = false;
  int exit_code = -1;
  bool signaled = false;
  int signal = 0;
  std::string output;  // stdout + stderr
};

// Whether the child ended by abort(): SIGABRT on Linux; on Windows the C
// runtime's abort() ends the process with exit code 3.
inline bool aborted(const child_result& r) {
#if defined(_WIN32)
  return r.exited && r.exit_code == 3;
#else
  return r.signaled && r.signal == SIGABRT;
#endif
}

#if defined(_WIN32)
// Runs a helper program from GORO_HELPERS_DIR with its output captured
// (CreateProcess, stdout and stderr on one pipe). Under Wine the directory
// is a Unix path: it is reached through Wine's Z: drive.
inline child_result run_helper(const std::string& name, const std::vector<std::string>& args = {}) {
  std::string path = std::string(GORO_HELPERS_DIR) + "/goro_helper_" + name + ".exe";
  if (!path.empty() && path[0] == '/') path = "Z:" + path;
  for (char& c : path)
    if (c == '/') c = '\\';
  std::string cmd = "\"" + path + "\"";
  for (const auto& a : args) cmd += " \"" + a + "\"";
  child_result r;
  SECURITY_ATTRIBUTES sa{sizeof sa, nullptr, TRUE};
  HANDLE rd = nullptr, wr = nullptr;
  if (!CreatePipe(&rd, &wr, &sa, 0)) return r;
  SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
  STARTUPINFOA si{};
  si.cb = sizeof si;
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = wr;
  si.hStdError = wr;
  PROCESS_INFORMATION pi{};
  std::vector<char> line(cmd.begin(), cmd.end());
  line.push_back('\0');
  const BOOL ok = CreateProcessA(path.c_str(), line.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr, &si, &pi);
  CloseHandle(wr);
  if (!ok) {
    CloseHandle(rd);
    r.output = "CreateProcess failed for " + path;
    return r;
  }
  char buf[4096];
  DWORD n = 0;
  while (ReadFile(rd, buf, sizeof buf, &n, nullptr) && n > 0)
    for (DWORD i = 0; i < n; ++i)
      if (buf[i] != '\r') r.output += buf[i];  // the C runtime's text mode writes "\r\n"
  CloseHandle(rd);
  WaitForSingleObject(pi.hProcess, INFINITE);
  DWORD code = 0;
  GetExitCodeProcess(pi.hProcess, &code);
  CloseHandle(pi.hProcess);
  CloseHandle(pi.hThread);
  r.exited = true;
  r.exit_code = static_cast<int>(code);
  return r;
}
#else
// Runs a helper program from GORO_HELPERS_DIR with its output captured.
inline child_result run_helper(const std::string& name, const std::vector<std::string>& args = {}) {
  std::string path = std::string(GORO_HELPERS_DIR) + "/goro_helper_" + name;
  int fds[2];
  if (pipe(fds) != 0) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> argv{const_cast<char*>(path.c_str())};
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  child_result r;
  if (rc != 0) {
    close(fds[0]);
    r.output = "posix_spawn failed for " + path;
    return r;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.output.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exited = WIFEXITED(status);
  if (r.exited) r.exit_code = WEXITSTATUS(status);
  r.signaled = WIFSIGNALED(status);
  if (r.signaled) r.signal = WTERMSIG(status);
  return r;
}
#endif

// Lets other goroutines run for a while (for tests without timers).
inline void settle(int rounds = 50) {
  for (int i = 0; i < rounds; ++i) goro::yield();
}

// Polls pred until it holds or `limit` has passed (yielding inside a
// goroutine, sleeping briefly on a plain thread); returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    if (goro::this_goroutine::inside())
      goro::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// The same, always sleeping the calling thread (a goroutine keeps its P:
// for tests that watch sysmon act on a running goroutine, or that run
// inside goro::blocking, where yield() is a usage_error).
template <class Pred>
bool eventually_sleeping(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace goro_test
