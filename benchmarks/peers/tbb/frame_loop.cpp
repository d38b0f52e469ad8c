// frame_loop peer (../../frame_loop.hpp): oneTBB, --procs threads; each
// frame runs its jobs in a task_group and waits on it.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_group.h>

#include "../../frame_loop.hpp"

int main(int argc, char** argv) {
  const auto f = frame_loop::parse(argc, argv);
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, f.c.procs);
  frame_loop::run("tbb", f, [&](std::uint64_t* results) {
    tbb::task_group tg;
    for (std::uint64_t j = 0; j < f.jobs; ++j)
      tg.run([iters = f.iters, slot = results + j] { frame_loop::job(iters, slot); });
    tg.wait();
  });
}
