// The scheduler's execution-tracer events (trace.hpp): run slices,
// wake-ups and creations. Part of scheduler<Policy> (sched.hpp).
// Included at the end of sched.hpp only.
#pragma once

namespace goro::detail {

// A run slice of gp that began at t0 on P trace_p has ended (on g0,
// before mm->after is carried out); a preemption is also an instant event.
// `flow`: the wake-up or creation arrow that ends at this slice (0: none).
template <class Policy>
GORO_NOINLINE auto scheduler<Policy>::trace_run(m* mm, g* gp, std::int32_t trace_p, std::int64_t t0,
                                                std::uint64_t flow) noexcept -> void {
  if (!tracing::enabled()) return;
  const char* why = "other";
  switch (mm->after) {
    case after_switch::yield:
      why = "yield";
      break;
    case after_switch::preempt:
      why = "preempted";
      break;
    case after_switch::park:
      why = "blocked";
      break;
    case after_switch::exit:
      why = "exit";
      break;
    case after_switch::call:
      why = "runtime call";
      break;
    case after_switch::async_preempt:
      why = "preempted (signal)";
      break;
    case after_switch::exitsyscall:
      why = "blocking call, no P";
      break;
    case after_switch::none:
      break;
  }
  const std::int64_t t1 = tracing::now();
  const std::int64_t cut = std::exchange(mm->trace_p_cut, 0), resume = std::exchange(mm->trace_p_resume, 0);
  if (cut == 0 || trace_p < 0) {
    tracing::record({t0, t1 - t0, gp->id, trace_rt_, trace_p, mm->id, tracing::kind::run, flow & 1, why, flow}, true);
  } else {
    // goro::blocking calls in the slice (enter_syscall): the whole slice on
    // the M's track, the parts around the calls on the Ps' tracks.
    tracing::record({t0, t1 - t0, gp->id, trace_rt_, -1, mm->id, tracing::kind::run, 0, why, 0}, true);
    tracing::record({t0, cut - t0, gp->id, trace_rt_, trace_p, -1, tracing::kind::p_part,
                     static_cast<std::uint64_t>(mm->id), "blocking call", flow},
                    true);
    trace_p = resume != 0 ? mm->trace_p_resume_id : -1;
    if (resume != 0)
      tracing::record({resume, t1 - resume, gp->id, trace_rt_, trace_p, -1, tracing::kind::p_part,
                       static_cast<std::uint64_t>(mm->id), why, 0},
                      true);
  }
  if (mm->after == after_switch::preempt || mm->after == after_switch::async_preempt)
    tracing::record({t1, 0, gp->id, trace_rt_, trace_p, mm->id, tracing::kind::preempt,
                     mm->after == after_switch::async_preempt ? 1u : 0u},
                    true);
}

// ready(gp) by mm (nullptr: a thread outside this runtime). Formatting
// waits when called on a goroutine's stack (see tracing::record).
// A flow arrow goes from here to gp's next run slice (gp->trace_flow,
// read by the M that runs it: the run queue orders the two).
template <class Policy>
GORO_NOINLINE auto scheduler<Policy>::trace_wake(m* mm, g* gp) noexcept -> void {
  const std::int32_t p_id = mm && mm->pp ? static_cast<std::int32_t>(mm->pp->id) : -1;
  gp->trace_flow = tracing::new_flow(false);
  tracing::record(
      {tracing::now(), 0, gp->id, trace_rt_, p_id, mm ? mm->id : -1, tracing::kind::wake, 0, "", gp->trace_flow},
      current_g() == nullptr);
}

// newproc of gp (its id set, not queued yet) by mm's goroutine, or by a
// thread outside the runtime (mm nullptr): a "go" marker and an arrow to
// gp's first run slice.
template <class Policy>
GORO_NOINLINE auto scheduler<Policy>::trace_create(m* mm, g* gp) noexcept -> void {
  const std::int32_t p_id = mm && mm->pp ? static_cast<std::int32_t>(mm->pp->id) : -1;
  const std::uint64_t parent = mm && mm->curg ? mm->curg->id : 0;
  gp->trace_flow = tracing::new_flow(true);
  tracing::record(
      {tracing::now(), 0, gp->id, trace_rt_, p_id, mm ? mm->id : -1, tracing::kind::create, parent, "", gp->trace_flow},
      current_g() == nullptr);
}

}  // namespace goro::detail
