// The executor, alone: one process, no MPI. A pipeline rank that holds every stage (pp=1,
// loops=2 hands activations over locally), a communicator that fails on any call, and a
// data-parallel hook object that records what the executor asks of it. The calls must follow
// the lowered action list exactly: UNSHARD / RESHARD / REDUCE_GRAD where the list has them,
// before_compute before every F/B/I/W (backward or not), on_last_backward right before the
// stage's last backward of the step.
#include "loom/parallel/executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../support/fake_backend.h"
#include "loom/comm/backend.h"
#include "loom/common/error.h"
#include "loom/model/model.h"
#include "loom/parallel/dp_hooks.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"

using namespace loom;
using schedule::Kind;

namespace {

// A communicator of one rank that nothing may use.
class NoComm : public test::FakeBackend {
 public:
  NoComm() : FakeBackend("none", 0, 1) {}
};

// Records every call as "<what> <stage>".
class RecordingHooks : public parallel::DpHooks {
 public:
  RecordingHooks(int stage, std::vector<std::string>* log) : stage_(stage), log_(log) {}
  void unshard() override { note("unshard"); }
  void reshard() override { note("reshard"); }
  void before_compute(bool backward) override {
    note(backward ? "compute-backward" : "compute-forward");
  }
  void on_last_backward() override { note("last-backward"); }
  void reduce_grad() override { note("reduce"); }

 private:
  void note(const std::string& what) { log_->push_back(what + " " + std::to_string(stage_)); }
  int stage_;
  std::vector<std::string>* log_;
};

// What the executor must do with the hooks, read off the action list.
std::vector<std::string> expected_calls(const std::vector<schedule::Action>& actions) {
  std::map<int, size_t> last_backward;
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind == Kind::B || actions[i].kind == Kind::W)
      last_backward[actions[i].stage] = i;
  std::vector<std::string> out;
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto& a = actions[i];
    std::string s = " ";  // appended, not " " + to_string(): GCC 12 warns (a false overflow)
    s += std::to_string(a.stage);
    if (last_backward.count(a.stage) && last_backward[a.stage] == i)
      out.push_back("last-backward" + s);
    if (schedule::is_compute(a.kind))
      out.push_back((a.kind == Kind::F ? "compute-forward" : "compute-backward") + s);
    if (a.kind == Kind::UNSHARD) out.push_back("unshard" + s);
    if (a.kind == Kind::RESHARD) out.push_back("reshard" + s);
    if (a.kind == Kind::REDUCE_GRAD) out.push_back("reduce" + s);
  }
  return out;
}

void run_and_compare(const std::string& schedule_name, schedule::DpMode mode) {
  SCOPED_TRACE(schedule_name);
  config::ModelConfig mc;
  mc.kind = config::ModelKind::Gpt;
  mc.layers = 2;  // embedding, 2 layers, head: stage 0 = blocks 0-1, stage 1 = blocks 2-3
  mc.width = 16;
  mc.heads = 2;
  mc.seq_len = 8;
  model::Model m = model::build(mc, 7);
  ASSERT_EQ(m.blocks.size(), 4u);
  parallel::Stage s0(0, 2, {m.blocks[0], m.blocks[1]}, 0), s1(1, 2, {m.blocks[2], m.blocks[3]}, 2);
  const int mbs = 3, b = 2;
  schedule::Shape shape{1, 2, mbs};
  schedule::LowerOptions lo;
  lo.dp_mode = mode;
  auto lowered = schedule::lower(schedule::generate(schedule_name, shape), lo);
  std::vector<std::string> log;
  RecordingHooks y0(0, &log), y1(1, &log);
  NoComm none;
  std::vector<parallel::ActivationSpec> boundary(2);
  boundary[1].shape = {b, mc.seq_len, mc.width};
  parallel::Executor ex(lowered, 0, none, {{0, &s0}, {1, &s1}}, {{0, &y0}, {1, &y1}}, boundary);
  std::vector<torch::Tensor> in, tgt;
  torch::manual_seed(3);
  for (int j = 0; j < mbs; ++j) {
    in.push_back(torch::randint(0, mc.vocab, {b, mc.seq_len}, torch::kLong));
    tgt.push_back(torch::randint(0, mc.vocab, {b, mc.seq_len}, torch::kLong));
  }
  auto report = ex.run_step(in, tgt, 1.0 / mbs);
  EXPECT_EQ(log, expected_calls(lowered.ranks[0]));
  EXPECT_GT(report.compute_s, 0);
  // The last stage computed a loss for every micro-batch (near ln(vocab) at initialization),
  // and gradients reached stage 0.
  EXPECT_NEAR(s1.loss_sum() / mbs, std::log(double(mc.vocab)), 1.0);
  for (const auto& p : s0.params()) EXPECT_TRUE(p.tensor.grad().defined()) << p.name;
}

}  // namespace

TEST(Executor, HooksFollowTheActionsBreadthFirstSharded) {
  run_and_compare("bfs", schedule::DpMode::ZeroParams);
}

TEST(Executor, HooksFollowTheActionsGpipeReduceOnly) {
  run_and_compare("gpipe", schedule::DpMode::Reduce);
}
