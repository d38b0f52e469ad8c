// Child process for dump_test: "dump" parks a goroutine on a channel, then
// raises SIGQUIT (the dump goes to stderr, exit status 2); "own" does the
// same after installing its own SIGQUIT handler first (which exits 7);
// "notified" does the same with SIGQUIT notified before the runtime
// starts and stopped in main (stop must bring the dump back); "quiet" only starts a
// runtime (for the GORO_DEBUG check); "shutdown"
// leaves a goroutine blocked forever for the shutdown report; "forked"
// sends SIGQUIT to a forked child.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <goro/goro.hpp>
#include <thread>

namespace {

[[gnu::noinline]] void helper_parked_receiver(goro::chan<int>& c) {
  (void)c.recv();
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void helper_spawner(goro::chan<int>& c, goro::chan<int>& started) {
  goro::go([&c, &started] {
    started.send(1);
    helper_parked_receiver(c);
  });
  asm volatile("" ::: "memory");
}

[[gnu::noinline]] void helper_forever(goro::wait_group& wg) {
  wg.wait();
  asm volatile("" ::: "memory");
}

}  // namespace

int main(int argc, char** argv) {
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  const char* mode = argc > 1 ? argv[1] : "dump";
  if (std::strcmp(mode, "own") == 0) {
    struct sigaction sa {};
    sa.sa_handler = [](int) { _exit(7); };
    sigaction(SIGQUIT, &sa, nullptr);
  }
  goro::chan<int> sigs(1);
  const bool notified = std::strcmp(mode, "notified") == 0;
  if (notified) goro::signal::notify(sigs, {SIGQUIT});  // before any runtime; stopped in main below
  if (std::strcmp(mode, "shutdown") == 0) {
    goro::wait_group never;
    never.add(1);
    {
      goro::runtime rt{goro::options{.maxprocs = 1, .on_main_return = goro::main_return::wait}};  // no ending: reported
      rt.go([&] { helper_forever(never); });
    }
    return 0;
  }
  goro::runtime rt{goro::options{2}};
  if (std::strcmp(mode, "quiet") == 0) return rt.run([] { return 0; });
  if (std::strcmp(mode, "forked") == 0) {
    // A forked child inherits goro's SIGQUIT handler, but not the dump
    // thread, whose pipe it shares with this process: SIGQUIT to the
    // child must not dump (and end) this one, and must still end the child.
    rt.run([] {});
    const pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 30; ++i) usleep(100'000);
      _exit(7);
    }
    usleep(100'000);
    kill(pid, SIGQUIT);
    int st = 0;
    waitpid(pid, &st, 0);
    std::printf("child: %s %d\n", WIFSIGNALED(st) ? "signal" : "exit",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    std::fflush(stdout);
    usleep(300'000);  // time for a dump the child's signal would have set off here
    std::printf("parent alive\n");
    return 0;
  }
  rt.run([&] {
    if (notified) goro::signal::stop(sigs);
    goro::chan<int> c, started;
    helper_spawner(c, started);
    (void)started.recv();
    // SIGQUIT comes from a plain thread once main is asleep: the dump must
    // find main parked (a goroutine running on another M shows no frames).
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      kill(getpid(), SIGQUIT);
    }).detach();
    goro::sleep_for(std::chrono::seconds(10));  // the dump exits meanwhile
    c.send(1);
  });
  return 3;
}
