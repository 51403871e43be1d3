// Stage boundary shapes on an interleaved layout (pp=2, loops=2: stages 0 and 2 on pipeline
// rank 0, 1 and 3 on rank 1), one thread per rank over an in-process communicator; no MPI.
// Each rank's specs must match a forward of the whole model.
#include "loom/parallel/boundary_specs.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "../support/thread_comm.h"
#include "loom/common/error.h"
#include "loom/model/model.h"
#include "loom/model/partition.h"

using namespace loom;

namespace {

void check_interleaved(const config::ModelConfig& mc, int pp, int loops) {
  const int64_t micro_batch = 3;
  model::Model m = model::build(mc, 1);
  const int n = pp * loops;
  std::vector<double> costs(m.blocks.size(), 1.0);
  model::Partition cut = model::partition(costs, n, "uniform");

  // Expected: the whole model, forward on zeros.
  const model::TensorSpec in = model::input_spec(mc, micro_batch);
  std::vector<model::TensorSpec> want(n + 1);
  {
    torch::NoGradGuard ng;
    torch::Tensor x = torch::zeros(in.shape, torch::TensorOptions().dtype(in.dtype));
    for (int s = 0; s < n; ++s) {
      want[s] = {x.sizes().vec(), x.scalar_type()};
      for (int b = cut.begin(s); b < cut.end(s); ++b) x = m.blocks[b]->forward(x);
    }
    want[n] = {x.sizes().vec(), x.scalar_type()};
  }

  test::Mailbox hub;
  std::vector<std::vector<parallel::ActivationSpec>> got(pp);
  std::vector<std::thread> ranks;
  for (int r = 0; r < pp; ++r)
    ranks.emplace_back([&, r] {
      test::ThreadComm comm(hub, "pipeline", r, pp);
      std::vector<std::unique_ptr<parallel::Stage>> owned;
      std::map<int, parallel::Stage*> stages;
      for (int s = r; s < n; s += pp) {
        std::vector<std::shared_ptr<model::Block>> blocks(m.blocks.begin() + cut.begin(s),
                                                          m.blocks.begin() + cut.end(s));
        owned.push_back(std::make_unique<parallel::Stage>(s, n, blocks, cut.begin(s)));
        stages[s] = owned.back().get();
      }
      got[r] = parallel::infer_boundaries(stages, {pp, loops, 2}, r, comm, in);
    });
  for (auto& t : ranks) t.join();

  for (int r = 0; r < pp; ++r) {
    ASSERT_EQ(got[r].size(), size_t(n + 1));
    for (int s = r; s < n; s += pp)
      for (int b : {s, s + 1}) {
        EXPECT_EQ(got[r][b].shape, want[b].shape) << "rank " << r << " boundary " << b;
        EXPECT_EQ(got[r][b].dtype, want[b].dtype) << "rank " << r << " boundary " << b;
      }
  }
  EXPECT_TRUE(hub.box.empty()) << "a spec was sent that nobody received";
}

TEST(BoundarySpecs, GptInterleavedOverTwoRanks) {
  config::ModelConfig mc;
  mc.kind = config::ModelKind::Gpt;
  mc.seq_len = 8;
  mc.width = 16;
  mc.heads = 2;
  mc.layers = 2;  // embedding, 2 layers, head: one block per stage
  check_interleaved(mc, 2, 2);
}

TEST(BoundarySpecs, CnnInterleavedOverTwoRanks) {
  config::ModelConfig mc;
  mc.kind = config::ModelKind::Cnn;
  check_interleaved(mc, 2, 2);
}

TEST(BoundarySpecs, OneRankHandsSpecsOverLocally) {
  config::ModelConfig mc;
  mc.kind = config::ModelKind::Mlp;
  mc.width = 8;
  mc.layers = 3;
  check_interleaved(mc, 1, 4);
}

}  // namespace
