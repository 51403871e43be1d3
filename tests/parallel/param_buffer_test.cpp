// The flat parameter-and-gradient buffer of a stage, alone: one process, no MPI. A
// communicator of two "mirror" ranks stands for the DP group: every peer is assumed to hold
// exactly this rank's data, so a sum is twice the input, a gather repeats this rank's shard,
// and every call completes at once. It records what it is asked (kind, elements, where in the
// buffer), which is what the tests check: views, bucket ranges, shards, bytes held.
#include "loom/parallel/param_buffer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../support/fake_backend.h"
#include "loom/comm/backend.h"
#include "loom/comm/work.h"
#include "loom/common/error.h"
#include "loom/model/model.h"
#include "loom/parallel/memory_tracker.h"

using namespace loom;

namespace {

struct Recorded {
  std::string kind;
  int64_t numel;
  const void* data;
};

class MirrorComm : public test::FakeBackend {
 public:
  explicit MirrorComm(int size) : FakeBackend("mirror", 0, size) {}
  std::vector<Recorded> calls;

 protected:
  using Call_ = comm::Backend::Call;
  comm::WorkPtr do_all_reduce(const at::Tensor& t, comm::ReduceOp, const Call_&) override;
  comm::WorkPtr do_reduce_scatter(const at::Tensor& in, const at::Tensor& out, comm::ReduceOp,
                                  const Call_&) override {
    calls.push_back({"reduce_scatter", in.numel(), in.data_ptr()});
    out.copy_(in.narrow(0, 0, out.numel()) * size());
    return done();
  }
  comm::WorkPtr do_all_gather(const at::Tensor& in, const at::Tensor& out, const Call_&) override {
    calls.push_back({"all_gather", out.numel(), out.data_ptr()});
    for (int r = 0; r < size(); ++r) out.narrow(0, r * in.numel(), in.numel()).copy_(in);
    return done();
  }
};

comm::WorkPtr MirrorComm::do_all_reduce(const at::Tensor& t, comm::ReduceOp, const Call_&) {
  calls.push_back({"all_reduce", t.numel(), t.data_ptr()});
  t.mul_(size());
  return done();
}

// A two-layer MLP as one stage (first and last): 4 parameter tensors.
struct Mlp {
  model::Model m;
  std::unique_ptr<parallel::Stage> stage;
  std::vector<torch::Tensor> initial;
  Mlp() {
    config::ModelConfig mc;
    mc.kind = config::ModelKind::Mlp;
    mc.width = 10;
    mc.layers = 1;
    m = model::build(mc, 5);
    stage = std::make_unique<parallel::Stage>(0, 1, m.blocks, 0);
    for (auto& p : stage->params()) initial.push_back(p.tensor.detach().clone());
  }
  int64_t numel() const {
    int64_t n = 0;
    for (auto& t : initial) n += t.numel();
    return n;
  }
  // One forward and backward of a random micro-batch.
  void backward(int seed) {
    torch::manual_seed(seed);
    stage->forward(0, torch::randn({3, 1, 28, 28}), torch::randint(0, 10, {3}), 1.0);
    stage->backward(0, torch::Tensor());
  }
};

bool inside(const torch::Tensor& view, const torch::Tensor& flat) {
  auto* p = static_cast<const char*>(view.data_ptr());
  auto* b = static_cast<const char*>(flat.data_ptr());
  return p >= b && p + view.numel() * 4 <= b + flat.numel() * 4;
}

TEST(ParamBuffer, ParametersAndGradientsAreViewsOfTheFlatBuffers) {
  Mlp net;
  MirrorComm dp(1);
  parallel::ParamBuffer buf(*net.stage, dp, {});
  const auto& l = buf.layout();
  EXPECT_EQ(l.numel, net.numel());
  EXPECT_EQ(l.padded, l.numel);  // unsharded: no padding
  ASSERT_EQ(l.slots.size(), net.initial.size());
  for (size_t i = 0; i < l.slots.size(); ++i) {
    const auto& t = net.stage->params()[i].tensor;
    EXPECT_TRUE(torch::equal(t, net.initial[i])) << i;  // values kept
    EXPECT_EQ(t.data_ptr<float>(), buf.params().data_ptr<float>() + l.slots[i].offset) << i;
    EXPECT_EQ(t.grad().data_ptr<float>(), buf.grads().data_ptr<float>() + l.slots[i].offset) << i;
  }
  // Autograd accumulates into the buffer (in place), so the flat gradient is the sum.
  net.backward(1);
  const auto once = buf.grads().clone();
  EXPECT_GT(once.abs().sum().item<double>(), 0);
  net.backward(1);
  EXPECT_TRUE(torch::allclose(buf.grads(), 2 * once));
  for (size_t i = 0; i < l.slots.size(); ++i)
    EXPECT_TRUE(inside(net.stage->params()[i].tensor.grad(), buf.grads())) << i;
  // dp = 1: a gradient sync issues nothing and leaves the gradient as it is.
  buf.finish_grad_sync();
  EXPECT_TRUE(dp.calls.empty());
  EXPECT_TRUE(torch::equal(buf.grads(), 2 * once));
  EXPECT_DOUBLE_EQ(buf.grad_sq_sum(), (2 * once).pow(2).sum().item<double>());
  buf.zero_grads();
  EXPECT_EQ(buf.grads().abs().sum().item<double>(), 0);
  // Accounting: one parameter buffer and one gradient buffer, nothing transient.
  auto m = buf.memory();
  EXPECT_EQ(m.params, 4 * l.numel);
  EXPECT_EQ(m.grads, 4 * l.numel);
  EXPECT_EQ(m.optimizer, 0);
  EXPECT_EQ(m.working, 0);
  EXPECT_EQ(buf.working_bytes(), 0);
}

TEST(ParamBuffer, BucketsAreRangesReducedInPlaceFromTheHooks) {
  Mlp net;
  MirrorComm dp(2);
  parallel::BufferOptions o;
  o.buckets = true;
  o.bucket_mib = 200.0 * 4 / (1 << 20);  // 200 floats: several buckets
  parallel::ParamBuffer buf(*net.stage, dp, o);
  const auto& b = buf.buckets();
  ASSERT_GT(b.size(), 1);
  net.backward(1);  // not armed: no bucket starts
  EXPECT_TRUE(dp.calls.empty());
  const auto sum = buf.grads().clone();
  buf.arm();
  net.backward(2);
  // Every bucket started from a hook, in order, each on its own range of the gradient buffer,
  // and together the ranges cover it exactly (reverse parameter order: from the end).
  ASSERT_EQ(int(dp.calls.size()), b.size());
  EXPECT_EQ(buf.buckets_started_by_hooks(), b.size());
  int64_t end = buf.layout().numel;
  for (int k = 0; k < b.size(); ++k) {
    const auto& bk = b.buckets()[k];
    EXPECT_EQ(dp.calls[k].kind, "all_reduce");
    EXPECT_EQ(dp.calls[k].numel, bk.numel);
    const int64_t offset = buf.layout().slots[bk.params.back()].offset;
    EXPECT_EQ(dp.calls[k].data, buf.grads().data_ptr<float>() + offset) << k;
    EXPECT_EQ(offset + bk.numel, end) << k;
    end = offset;
  }
  EXPECT_EQ(end, 0);
  const auto reduced = buf.grads().clone();  // two mirror ranks: twice the local sum
  buf.start_grad_sync();                     // REDUCE_GRAD: nothing left to start
  EXPECT_EQ(int(dp.calls.size()), b.size());
  buf.finish_grad_sync();  // mean over the two ranks
  EXPECT_TRUE(torch::equal(buf.grads(), reduced / 2));
  EXPECT_GT((reduced / 2 - sum).abs().max().item<double>(), 0);  // the second backward added
  auto m = buf.memory();
  EXPECT_EQ(m.grads, 4 * buf.layout().numel);  // no bucket copies
}

TEST(ParamBuffer, ShardedTransientParametersAndGradients) {
  Mlp net;
  MirrorComm dp(3);  // 3 shards: the layout carries padding unless numel % 3 == 0
  parallel::BufferOptions o;
  o.sharded = true;
  o.transient_grads = true;
  o.transient_params = true;
  parallel::ParamBuffer buf(*net.stage, dp, o);
  const auto& l = buf.layout();
  EXPECT_EQ(l.padded % 3, 0);
  EXPECT_EQ(l.shard, l.padded / 3);
  EXPECT_GE(l.padded, l.numel);
  // Between uses the stage's parameters are empty and only the master shard exists.
  EXPECT_FALSE(buf.params().defined());
  for (auto& p : net.stage->params()) EXPECT_EQ(p.tensor.numel(), 0) << p.name;
  auto flat = l.flatten(net.initial);
  EXPECT_TRUE(torch::equal(buf.shard_params(), l.shard_of(flat, 0)));
  EXPECT_EQ(buf.working_bytes(), 0);
  // Gather: one all-gather into a fresh full buffer; the parameters become its views.
  buf.start_param_sync();
  buf.start_param_sync();  // already being gathered: no second call
  ASSERT_EQ(dp.calls.size(), 1u);
  EXPECT_EQ(dp.calls[0].kind, "all_gather");
  EXPECT_EQ(dp.calls[0].numel, l.padded);
  buf.finish_param_sync();
  EXPECT_EQ(buf.working_bytes(), 4 * l.padded);
  for (size_t i = 0; i < l.slots.size(); ++i)
    EXPECT_TRUE(inside(net.stage->params()[i].tensor, buf.params())) << i;
  EXPECT_TRUE(torch::equal(buf.params().narrow(0, 0, l.shard), l.shard_of(flat, 0)));
  // Gradients: the full buffer exists from the first backward to the end of the sync.
  buf.ensure_grads();
  net.backward(1);
  EXPECT_EQ(buf.working_bytes(), 8 * l.padded);
  const auto full = buf.grads().clone();
  buf.start_grad_sync();
  ASSERT_EQ(dp.calls.size(), 2u);
  EXPECT_EQ(dp.calls[1].kind, "reduce_scatter");
  EXPECT_EQ(dp.calls[1].numel, l.padded);
  for (auto& p : net.stage->params()) EXPECT_FALSE(p.tensor.grad().defined()) << p.name;
  buf.finish_grad_sync();
  EXPECT_FALSE(buf.grads().defined());
  EXPECT_TRUE(torch::allclose(buf.shard_grads(), l.shard_of(full, 0)));  // 3 x sum / 3
  EXPECT_TRUE(buf.shard_params().grad().defined());  // what the optimizer applies
  buf.drop_params();
  EXPECT_FALSE(buf.params().defined());
  EXPECT_EQ(buf.working_bytes(), 0);
  for (auto& p : net.stage->params()) EXPECT_EQ(p.tensor.numel(), 0) << p.name;
  // Accounting: the shards persist, the full copies count at their peak.
  auto m = buf.memory();
  EXPECT_EQ(m.params, 4 * (l.shard + l.padded));
  EXPECT_EQ(m.grads, 4 * (l.shard + l.padded));
  EXPECT_EQ(m.working, 8 * l.padded);
}

TEST(ParamBuffer, ShardedPersistentKeepsFullParametersAndAMasterShard) {
  Mlp net;
  MirrorComm dp(2);
  parallel::BufferOptions o;
  o.sharded = true;  // zero1: persistent full parameters and gradients
  parallel::ParamBuffer buf(*net.stage, dp, o);
  const auto& l = buf.layout();
  EXPECT_TRUE(buf.params().defined());
  EXPECT_NE(buf.shard_params().data_ptr(), buf.params().data_ptr());              // a copy
  EXPECT_EQ(buf.shard_grads().data_ptr<float>(), buf.grads().data_ptr<float>());  // rank 0's view
  EXPECT_EQ(buf.shard_grads().numel(), l.shard);
  auto m = buf.memory();
  EXPECT_EQ(m.params, 4 * (l.padded + l.shard));
  EXPECT_EQ(m.grads, 4 * l.padded);
  EXPECT_EQ(m.working, 0);
}

}  // namespace

namespace {

// The accounting is what the allocator holds: building the buffer allocates the flat buffers
// and frees the stage's original parameter storage (the parameters become views).
TEST(ParamBuffer, MemoryIsWhatTheAllocatorHolds) {
  parallel::MemoryTracker::install();
  for (bool sharded : {false, true}) {
    SCOPED_TRACE(sharded ? "sharded" : "unsharded");
    Mlp net;
    net.initial.clear();  // only the stage's own tensors hold parameters
    MirrorComm dp(2);
    const int64_t before = parallel::MemoryTracker::live_bytes();
    parallel::BufferOptions o;
    o.sharded = sharded;
    parallel::ParamBuffer buf(*net.stage, dp, o);
    const auto m = buf.memory();
    int64_t original = 0;
    for (auto& s : buf.layout().slots) original += 4 * s.numel;
    EXPECT_EQ(parallel::MemoryTracker::live_bytes() - before, m.params + m.grads - original);
  }
}

}  // namespace
