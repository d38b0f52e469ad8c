// main_thread: keep the main goroutine on the process's main thread with
// lock_os_thread(), as a GUI or OpenGL program must, while workers run on
// the runtime's other threads.
#include <cstdio>
#include <thread>

#include "goro/goro.hpp"

int main() {
  const std::thread::id main_thread = std::this_thread::get_id();
  int frames_shown = 0;
  bool stayed = true;
  goro::run(
      [&] {
        goro::lock_os_thread();  // from here on main runs only on this thread
        goro::chan<int> frames(4);
        for (int w = 0; w < 3; ++w)
          goro::go([frames, w]() mutable {  // "renderers": any thread
            for (int i = w; i < 30; i += 3) {
              goro::sleep_for(std::chrono::microseconds(200));
              frames.send(i * i);
            }
          });
        // The "event loop": must run on the main thread.
        long sum = 0;
        for (int i = 0; i < 30; ++i) {
          sum += *frames.recv();
          ++frames_shown;
          stayed = stayed && std::this_thread::get_id() == main_thread;
        }
        std::printf("main_thread: %d frames on the main thread, sum %ld\n", frames_shown, sum);
        goro::unlock_os_thread();
      },
      goro::options{.maxprocs = 4});
  return stayed && frames_shown == 30 ? 0 : 1;
}
