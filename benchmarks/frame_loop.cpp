// frame_loop (frame_loop.hpp): the frame loop is the main goroutine; each
// frame spawns its jobs as goroutines and waits on a wait_group.
#include <goro/goro.hpp>

#include "frame_loop.hpp"

int main(int argc, char** argv) {
  const auto f = frame_loop::parse(argc, argv);
  goro::runtime rt{goro::options{.maxprocs = f.c.procs}};
  rt.run([&] {
    frame_loop::run("goro", f, [&](std::uint64_t* results) {
      goro::wait_group wg;
      wg.add(static_cast<int>(f.jobs));
      for (std::uint64_t j = 0; j < f.jobs; ++j)
        goro::go([&wg, iters = f.iters, slot = results + j] {
          frame_loop::job(iters, slot);
          wg.done();
        });
      wg.wait();
    });
  });
}
