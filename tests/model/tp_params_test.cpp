// The planner's parameters per tensor-parallel rank (plan/transformer.h) are what loom's models
// hold on a rank: the split matrices' share and the replicated parameters whole, block by block.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "loom/model/model.h"
#include "loom/plan/transformer.h"

namespace {

using loom::config::ModelKind;

double numel(const loom::model::Block& b) {
  double n = 0;
  for (const auto& p : b.parameters()) n += double(p.numel());
  return n;
}

TEST(TensorParallelParams, PlannerCountsWhatARankHolds) {
  for (ModelKind kind : {ModelKind::Gpt, ModelKind::Llama}) {
    for (int tp : {1, 2, 4}) {
      SCOPED_TRACE(std::string(kind == ModelKind::Gpt ? "gpt" : "llama") + " tp " +
                   std::to_string(tp));
      loom::config::ModelConfig c;
      c.kind = kind;
      c.seq_len = 16;
      c.width = 64;
      c.layers = 2;
      c.heads = 4;
      if (kind == ModelKind::Llama) c.kv_heads = 4;
      const loom::plan::Transformer m = loom::plan::transformer_of(c);
      loom::model::TensorParallel group;
      group.size = tp;
      group.rank = tp - 1;
      const loom::model::Model model = loom::model::build(c, 7, group);
      ASSERT_EQ(model.blocks.size(), 4u);  // embedding, 2 layers, head
      EXPECT_EQ(numel(*model.blocks[0]), loom::plan::embedding_params_per_rank(m, tp));
      EXPECT_EQ(numel(*model.blocks[1]), loom::plan::layer_params_per_rank(m, tp));
      EXPECT_EQ(numel(*model.blocks[3]), loom::plan::head_params_per_rank(m, tp));
    }
  }
}

}  // namespace
