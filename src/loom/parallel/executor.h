#pragma once
// The pipeline executor interprets one rank's lowered action list (schedule/lower.h). It never
// looks at the schedule's name: gpipe, 1f1b, interleaved, bfs, zb-h1, zbv, dualpipev and
// hand-written CSV schedules all run through the same loop.
//  - RECV_F / RECV_B are posted ahead of time (a window of upcoming actions), so a message
//    that arrives early lands in its buffer while the rank computes something else;
//  - SEND_F / SEND_B are non-blocking; their buffers stay alive until the end of the step;
//  - adjacent stages on the same rank hand tensors over locally (a mailbox, no action);
//  - F / B / I / W call the Stage; the loss is computed on the last stage;
//  - UNSHARD / RESHARD / REDUCE_GRAD call the stage's data-parallel hooks (dp_hooks.h); the
//    hooks are told right before the stage's last backward of the step so that its reductions
//    overlap that backward, and before every compute action (DpHooks::before_compute: zero3
//    waits there for the gather that UNSHARD started, so the gather overlaps whatever ran in
//    between);
//  - a head tied to the embedding on another stage (tied_head.h) gets the weight after stage
//    0's first forward of a pass and gives its gradient back after the step's actions; stage
//    0's bucket hooks and REDUCE_GRAD wait for that.
// Every action is timed (Chrome trace of the real run).
#include <torch/torch.h>

#include <map>
#include <memory>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/parallel/dp_hooks.h"
#include "loom/parallel/stage.h"
#include "loom/parallel/tied_head.h"
#include "loom/schedule/schedule.h"
#include "loom/trace/chrome_trace.h"

namespace loom::parallel {

using TraceEvent = trace::Event;  // name "2F0", cat: the kind

struct StepReport {
  double compute_s = 0;      // time in F/B/I/W
  double compute_cpu_s = 0;  // CPU time of this thread in F/B/I/W (less than compute_s when
                             // ranks outnumber the cores and wait for one)
  double p2p_wait_s = 0;     // blocked on pipeline receives/sends
  int64_t peak_activation_bytes = 0;
  int peak_live_microbatches = 0;
  // Data-parallel transient buffers (DpHooks::working_bytes summed over the rank's stages)
  // and activations + those buffers, sampled after every action: their peaks in the step.
  int64_t peak_working_bytes = 0;
  int64_t peak_transient_bytes = 0;
};

class Executor {
 public:
  // stages: the stages this rank owns (by global stage index). hooks: their data-parallel
  // hooks, same keys (a stage without an entry has none).
  // boundary[s]: shape of stage s's input for one micro-batch (s >= 1), for this rank's
  // stages s and s + 1 (parallel/boundary_specs.h).
  Executor(const schedule::Schedule& lowered, int pp_rank, comm::Backend& pp_comm,
           std::map<int, Stage*> stages, std::map<int, DpHooks*> hooks,
           std::vector<ActivationSpec> boundary);

  // Runs one training step. inputs[j] / targets[j]: micro-batch j (needed on the ranks that
  // own the first / last stage; may be empty elsewhere). loss_scale multiplies each
  // micro-batch loss (1/m: the gradient is the mean over the replica's micro-batches).
  StepReport run_step(const std::vector<torch::Tensor>& inputs,
                      const std::vector<torch::Tensor>& targets, double loss_scale);

  // Forward-only pass for evaluation (every stage in order, micro-batches in order);
  // returns last-stage logits per micro-batch on the rank that owns the last stage.
  std::vector<torch::Tensor> run_forward(const std::vector<torch::Tensor>& inputs, int m);

  // A head tied to the embedding across stages (tied_head.h): refreshed at each pass, its
  // gradient added to the embedding's after the step's backwards, before stage 0's reduction.
  void tie_head(std::unique_ptr<TiedHead> t) { tied_ = std::move(t); }
  int64_t tied_copy_bytes() const { return tied_ ? tied_->copy_bytes() : 0; }
  // Two tags of `pp_comm` that no pipeline message of `shape` uses (the tied head's).
  static std::pair<int, int> spare_tags(const schedule::Shape& shape);

  void set_tracing(bool on) { tracing_ = on; }
  const std::vector<TraceEvent>& trace() const { return trace_; }
  const schedule::Shape& shape() const { return shape_; }  // its placement: who holds what
  void clear_trace() { trace_.clear(); }
  // Trace times count from `origin_us` on the clock of trace_clock_us() (steady, µs); each
  // executor otherwise counts from its own construction, and the ranks' timelines do not
  // line up (train/trace_clock.h gives all one origin).
  void set_trace_origin(double origin_us) { origin_us_ = origin_us; }
  double trace_clock_us() const { return now_us(); }

 private:
  struct Key {
    int stage, mb, dir;  // dir 0: activation into stage, 1: gradient into stage (from stage+1)
    bool operator<(const Key& o) const {
      return std::tie(stage, mb, dir) < std::tie(o.stage, o.mb, o.dir);
    }
    bool operator==(const Key& o) const = default;
  };
  int tag(const Key& k) const;
  // Posts the receive of RECV action `a`, after every receive its sender sends first: a
  // pair's receives are posted in the order its sends are (NCCL pairs them in that order).
  void post_recv(const schedule::Action& a);
  void post_recv(const Key& k);
  torch::Tensor take(const Key& k, bool* waited = nullptr);
  void deliver(int to_stage, int mb, int dir, const torch::Tensor& t);
  void reap_sends();  // drops the sends that completed
  double now_us() const;

  std::vector<schedule::Action> actions_;
  schedule::Shape shape_;
  int pp_rank_;
  comm::Backend& pp_;
  std::map<int, Stage*> stages_;
  std::map<int, DpHooks*> hooks_;
  std::vector<ActivationSpec> boundary_;
  // Received tensors are made on the stages' device.
  torch::TensorOptions device_options(torch::Dtype t) const {
    return stages_.empty() ? torch::dtype(t) : stages_.begin()->second->options(t);
  }
  std::map<int, size_t> last_backward_;         // stage -> index of its last B/W in actions_
  std::map<int, std::vector<Key>> sent_to_me_;  // peer rank -> what it sends here, in order
  std::map<int, size_t> posted_from_;           // peer rank -> how many of those are posted
  std::unique_ptr<TiedHead> tied_;
  // Whether stage s's data-parallel hooks wait for the tied head's gradient (stage 0 with a
  // tied head): no bucket hooks, its REDUCE_GRAD after exchange_grad().
  bool holds_reduction(int s) const { return tied_ && s == 0; }

  std::map<Key, torch::Tensor> mailbox_;                          // ready tensors
  std::map<Key, std::pair<torch::Tensor, comm::WorkPtr>> inbox_;  // posted receives
  std::map<Key, torch::Tensor> outbox_;                           // outputs waiting for SEND
  std::vector<std::pair<torch::Tensor, comm::WorkPtr>> sending_;  // posted sends
  bool tracing_ = true;
  std::vector<TraceEvent> trace_;
  double origin_us_;
};

}  // namespace loom::parallel
