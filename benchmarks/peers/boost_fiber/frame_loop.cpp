// frame_loop peer (../../frame_loop.hpp): Boost.Fiber, work_stealing on
// --procs threads; each frame spawns its jobs as fibers and waits on a
// wait group.
#include "../../frame_loop.hpp"
#include "fiber_pool.hpp"

int main(int argc, char** argv) {
  const auto f = frame_loop::parse(argc, argv);
  const bool suspend = bench::arg_flag(argc, argv, "--suspend");
  fiber_bench::run_pool(f.c.procs, suspend, [&] {
    frame_loop::run("boost_fiber", f, [&](std::uint64_t* results) {
      fiber_bench::wait_group wg;
      wg.add(static_cast<long>(f.jobs));
      for (std::uint64_t j = 0; j < f.jobs; ++j)
        fiber_bench::go([&wg, iters = f.iters, slot = results + j] {
          frame_loop::job(iters, slot);
          wg.done();
        });
      wg.wait();
    });
  });
}
