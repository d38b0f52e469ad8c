// lock_os_thread without exceptions: a locked main goroutine keeps its
// thread across channel waits.
#include <sys/syscall.h>
#include <unistd.h>

#include <goro/goro.hpp>

int main() {
  const long caller = ::syscall(SYS_gettid);
  bool stayed = true;
  goro::run([&] {
    goro::lock_os_thread();
    goro::chan<int> c;
    for (int i = 0; i < 20; ++i) {
      goro::go([c, i]() mutable { c.send(i); });
      (void)c.recv();
      stayed = stayed && ::syscall(SYS_gettid) == caller;
    }
    goro::unlock_os_thread();
  });
  return stayed ? 0 : 1;
}
