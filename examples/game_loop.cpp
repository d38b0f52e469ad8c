// game_loop: an engine's frame loop on the main thread. Work that must stay
// on that thread (UI, a GL context) runs as goroutines of a thread_lane the
// loop pumps each frame; each frame fans simulation jobs out to the
// runtime's ordinary goroutines and collects them with a deadline; an
// "asset loader" goroutine feeds the UI over a channel (docs/embedding.md).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "goro/goro.hpp"

using namespace std::chrono_literals;

namespace {

const std::thread::id main_thread = std::this_thread::get_id();
bool all_on_main = true;  // written only by lane goroutines and the loop: all on the main thread

// Stand-in for a call into a thread-bound API (OpenGL, a UI toolkit).
void must_be_main_thread() { all_on_main = all_on_main && std::this_thread::get_id() == main_thread; }

// A simulation job: some arithmetic over a chunk of the world.
double simulate(int chunk) {
  double x = chunk;
  for (int i = 0; i < 2000; ++i) x = x * 0.999 + 1.0;
  return x;
}

}  // namespace

int main() {
  goro::runtime rt({.maxprocs = 2});  // no run(): the main thread stays the engine's
  goro::thread_lane lane;              // bound to this (the main) thread

  // The UI: a lane goroutine for the whole game, fed by an ordinary one.
  goro::chan<std::string> ui_events(16);
  std::vector<std::string> hud;  // touched only on the main thread
  lane.go(rt, [&] {
    for (;;) {
      std::optional<std::string> ev = ui_events.recv();  // parks; comes back to this thread
      if (!ev) return;                                   // closed: the game is over
      must_be_main_thread();
      hud.push_back(*ev);
    }
  });
  rt.go([ui_events]() mutable {  // the "asset loader": any thread of the runtime
    for (int i = 1; i <= 5; ++i) {
      goro::sleep_for(10ms);
      ui_events.send("asset " + std::to_string(i) + " loaded");
    }
    ui_events.close();  // the sender closes: the UI goroutine returns
  });

  constexpr int frames = 30, jobs = 64;
  constexpr auto sim_budget = 8ms;  // late job results are dropped for this frame
  int late = 0, frame = 0;
  double world = 0;
  constexpr auto frame_time = 4ms;  // a fast "vsync", to keep the example short
  auto next_frame = std::chrono::steady_clock::now();
  for (; frame < frames || lane.goroutines() > 0; ++frame) {  // until the UI is done too
    next_frame += frame_time;
    // Simulation: fan out, then collect with a deadline, on the lane.
    bool simulated = false;
    lane.go(rt, [&] {
      goro::chan<double> results(jobs);  // buffered: a late job never blocks
      for (int j = 0; j < jobs; ++j) goro::go([results, j]() mutable { results.send(simulate(j)); });
      auto deadline = goro::after(sim_budget);
      for (int got = 0; got < jobs;) {
        bool expired = false;
        goro::select(goro::on_recv(results, [&](std::optional<double> r) { world += *r, ++got; }),
                     goro::on_recv(deadline, [&](auto) { expired = true; }));
        if (expired) {
          late += jobs - got;
          break;
        }
      }
      must_be_main_thread();  // apply the results to the scene graph
      simulated = true;
    });
    // Pump the lane until this frame's simulation is in (the UI runs too).
    while (!simulated) {
      if (lane.run_for(2ms) == 0) std::this_thread::sleep_for(20us);  // nothing ready: waiting on jobs
    }
    must_be_main_thread();  // "render"
    // Until the next frame: the lane's goroutines (the UI) get the time.
    while (std::chrono::steady_clock::now() < next_frame) {
      if (lane.run_for(next_frame - std::chrono::steady_clock::now()) == 0) std::this_thread::sleep_for(100us);
    }
  }
  std::printf("game_loop: %d frames, %d late jobs, %zu HUD messages, lane work on the main thread: %s\n", frame,
              late, hud.size(), all_on_main ? "yes" : "NO");
  return all_on_main && hud.size() == 5 ? 0 : 1;
}
