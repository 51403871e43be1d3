#pragma once
// What the executor asks of a stage's data-parallel mode, on the schedule's actions. Nothing
// else of the mode is visible to the executor (the trainer owns the rest: data_parallel.h).
//
//   unshard()            UNSHARD action (zero3: start all-gathering the parameters)
//   before_compute(bw)   right before each F/B/I/W of the stage; bw: the compute is B, I or W
//                        (zero3: wait for the gather; zero2/3: gradient buffer before a backward)
//   on_last_backward()   right before the stage's last B/W of the step (arms bucket hooks)
//   reduce_grad()        REDUCE_GRAD action (start every gradient reduction not started yet)
//   reshard()            RESHARD action
//   working_bytes()      transient full-size bytes held right now (sampled after every action)
//   exposed_wait_s()     seconds blocked on this mode's communication since the step began
//
// No libtorch here: the executor's unit test implements it with a recording fake.
#include <cstdint>

namespace loom::parallel {

class DpHooks {
 public:
  virtual ~DpHooks() = default;
  virtual void unshard() {}
  virtual void before_compute(bool /*backward*/) {}
  virtual void on_last_backward() {}
  virtual void reduce_grad() {}
  virtual void reshard() {}
  virtual int64_t working_bytes() const { return 0; }
  virtual double exposed_wait_s() const { return 0; }
};

}  // namespace loom::parallel
