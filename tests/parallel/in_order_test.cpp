// Pipeline ranks in one process (a thread each), over a communicator that pairs messages in
// the order they were posted between two ranks and ignores tags, as NCCL does. Under every
// generated schedule, with a head tied to the embedding (its weight the first message of a
// pass, its gradient the last of a step), one step must give the gradients of one stage
// holding the whole model, and an evaluation pass after it the same logits: if the two sides
// posted a pair's messages in different orders, a receive would get another message (a shape
// error, or wrong values).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../support/fake_backend.h"
#include "loom/common/error.h"
#include "loom/model/model.h"
#include "loom/parallel/executor.h"
#include "loom/parallel/tied_head.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"

using namespace loom;

namespace {

// Messages between ranks, kept per (source, destination) in the order they were sent.
struct Wire {
  std::mutex mu;
  std::condition_variable arrived;
  std::map<std::pair<int, int>, std::vector<torch::Tensor>> sent;
  std::map<std::pair<int, int>, size_t> posted;  // receives posted so far
};

// The k-th receive a rank posts from a source gets the k-th message that source sent it.
class InOrderRecv : public comm::Work {
 public:
  InOrderRecv(Wire& w, std::pair<int, int> pair, size_t k, torch::Tensor into)
      : Work("in-order recv", std::chrono::milliseconds(60000)),
        w_(w),
        pair_(pair),
        k_(k),
        into_(std::move(into)) {}

 protected:
  bool completed() override {
    std::lock_guard<std::mutex> lock(w_.mu);
    return take_locked();
  }
  bool block_until(std::chrono::steady_clock::time_point deadline) override {
    std::unique_lock<std::mutex> lock(w_.mu);
    w_.arrived.wait_until(lock, deadline, [&] { return w_.sent[pair_].size() > k_; });
    return take_locked();
  }

 private:
  bool take_locked() {
    if (w_.sent[pair_].size() <= k_) return false;
    if (!done_) {
      const torch::Tensor& m = w_.sent[pair_][k_];
      LOOM_CHECK(m.sizes() == into_.sizes(), "message ", k_, " from rank ", pair_.first,
                 " to rank ", pair_.second, " has shape ", m.sizes(), ", its receive ",
                 into_.sizes(), ": the two sides posted in different orders");
      into_.copy_(m);
      done_ = true;
    }
    return true;
  }
  Wire& w_;
  std::pair<int, int> pair_;
  size_t k_;
  torch::Tensor into_;
  bool done_ = false;
};

class InOrderBackend : public test::FakeBackend {
 public:
  InOrderBackend(Wire& w, int rank, int size) : FakeBackend("pp", rank, size), w_(w) {}

 protected:
  comm::WorkPtr do_send(const at::Tensor& t, int dst, int, const Call&) override {
    {
      std::lock_guard<std::mutex> lock(w_.mu);
      w_.sent[{rank(), dst}].push_back(t.detach().clone());
    }
    w_.arrived.notify_all();
    return done();
  }
  comm::WorkPtr do_recv(const at::Tensor& t, int src, int, const Call&) override {
    std::lock_guard<std::mutex> lock(w_.mu);
    const std::pair<int, int> pair{src, rank()};
    return std::make_shared<InOrderRecv>(w_, pair, w_.posted[pair]++, t);
  }

 private:
  Wire& w_;
};

config::ModelConfig tied_gpt() {
  config::ModelConfig mc;
  mc.kind = config::ModelKind::Gpt;
  mc.layers = 6;  // 8 blocks: 2 stages of 4, 4 of 2, or 8 of 1
  mc.width = 16;
  mc.heads = 2;
  mc.seq_len = 8;
  mc.vocab = 64;
  mc.tie_embeddings = true;
  return mc;
}

// One pipeline rank: its stages of the model (built whole, as every rank builds it) and the
// executor over `comm`.
struct Rank {
  model::Model m;
  std::map<int, std::unique_ptr<parallel::Stage>> stages;
  std::unique_ptr<parallel::Executor> ex;
};

void run_schedule(const std::string& name, const schedule::Shape& requested) {
  SCOPED_TRACE(name);
  const config::ModelConfig mc = tied_gpt();
  const int b = 2, mbs = requested.microbatches;
  const schedule::Schedule lowered =
      schedule::lower(schedule::generate(name, requested), schedule::LowerOptions{});
  const schedule::Shape& shape = lowered.shape;
  const int stages = shape.stages();
  const int per = 8 / stages;  // blocks a stage: 4, 2 or 1
  std::vector<parallel::ActivationSpec> boundary(stages);
  for (int s = 1; s < stages; ++s) boundary[s].shape = {b, mc.seq_len, mc.width};
  const int pp = shape.pp;
  Wire wire;
  std::vector<std::unique_ptr<InOrderBackend>> comms;
  for (int r = 0; r < pp; ++r) comms.push_back(std::make_unique<InOrderBackend>(wire, r, pp));
  std::vector<Rank> ranks(pp);
  const auto [weight_tag, grad_tag] = parallel::Executor::spare_tags(shape);
  for (int r = 0; r < pp; ++r) {
    Rank& k = ranks[r];
    k.m = model::build(mc, 7);
    std::map<int, parallel::Stage*> mine;
    for (int s : shape.stages_of(r)) {
      std::vector<std::shared_ptr<model::Block>> blocks(k.m.blocks.begin() + per * s,
                                                        k.m.blocks.begin() + per * (s + 1));
      k.stages[s] = std::make_unique<parallel::Stage>(s, stages, blocks, per * s);
      mine[s] = k.stages[s].get();
    }
    k.m.blocks.clear();
    auto tied = parallel::TiedHead::make(mine, stages, shape.rank_of(0), shape.rank_of(stages - 1),
                                         *comms[r], weight_tag, grad_tag);
    k.ex = std::make_unique<parallel::Executor>(lowered, r, *comms[r], mine,
                                                std::map<int, parallel::DpHooks*>{}, boundary);
    k.ex->tie_head(std::move(tied));
  }
  std::vector<torch::Tensor> in, tgt;
  torch::manual_seed(3);
  for (int j = 0; j < mbs; ++j) {
    in.push_back(torch::randint(0, mc.vocab, {b, mc.seq_len}, torch::kLong));
    tgt.push_back(torch::randint(0, mc.vocab, {b, mc.seq_len}, torch::kLong));
  }
  // A step, then an evaluation pass (the copy refreshed again), on every rank at once.
  std::vector<std::vector<torch::Tensor>> logits(pp);
  std::vector<std::exception_ptr> failed(pp);
  auto work = [&](int r) {
    try {
      ranks[r].ex->run_step(in, tgt, 1.0 / mbs);
      torch::NoGradGuard no_grad;
      logits[r] = ranks[r].ex->run_forward(in, mbs);
    } catch (...) {
      failed[r] = std::current_exception();
    }
  };
  std::vector<std::thread> others;
  for (int r = 1; r < pp; ++r) others.emplace_back(work, r);
  work(0);
  for (auto& t : others) t.join();
  for (auto& f : failed)
    if (f) std::rethrow_exception(f);

  // One stage holding the whole tied model, the same micro-batches.
  model::Model whole = model::build(mc, 7);
  parallel::Stage one(0, 1, whole.blocks, 0);
  for (int j = 0; j < mbs; ++j) {
    one.forward(j, in[j], tgt[j], 1.0 / mbs);
    one.backward(j, torch::Tensor());
  }
  std::map<std::string, torch::Tensor> want;
  for (const auto& p : one.params()) want[p.name] = p.tensor.grad();
  int compared = 0;
  for (auto& k : ranks)
    for (auto& [s, st] : k.stages)
      for (const auto& p : st->params()) {
        ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
        const torch::Tensor& w = want.at(p.name);
        EXPECT_LE((p.tensor.grad() - w).abs().max().item<double>(),
                  1e-5 * w.abs().max().item<double>() + 1e-7)
            << p.name;
        ++compared;
      }
  EXPECT_EQ(compared, static_cast<int>(want.size()));
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor>& got = logits[shape.rank_of(stages - 1)];
  ASSERT_EQ(static_cast<int>(got.size()), mbs);
  for (int j = 0; j < mbs; ++j) {
    const torch::Tensor w = one.forward_eval(in[j]);
    EXPECT_LE((got[j] - w).abs().max().item<double>(), 1e-5 * w.abs().max().item<double>())
        << "evaluation, micro-batch " << j;
  }
}

}  // namespace

TEST(InOrderMessages, EverySchedulePairsThemAsPosted) {
  torch::set_num_threads(1);
  run_schedule("gpipe", {2, 1, 4});
  run_schedule("1f1b", {2, 1, 4});
  run_schedule("zb-h1", {2, 1, 4});
  run_schedule("interleaved", {2, 2, 4});
  run_schedule("bfs", {2, 2, 4});
  run_schedule("zbv", {2, 2, 4});
  run_schedule("dualpipev", {2, 2, 4});
  // Other shapes: more micro-batches than the fill, one block a stage.
  run_schedule("zb-h1", {2, 1, 6});
  run_schedule("interleaved", {2, 2, 6});
  run_schedule("bfs", {2, 4, 3});
  run_schedule("zbv", {2, 2, 8});
  run_schedule("dualpipev", {2, 2, 6});
  // Four ranks: zbv's and dualpipev's pairs carried messages in two orders here too.
  run_schedule("1f1b", {4, 1, 8});
  run_schedule("interleaved", {4, 2, 8});
  run_schedule("zbv", {4, 2, 8});
  run_schedule("dualpipev", {4, 2, 8});
}
