// The Llama's closed forms: parameters against published model sizes, FLOPs by parts, and the
// activations loom's runtime keeps (hand-computed here; against the runtime itself in
// tests/cli/planner_activations_test.sh).
#include <gtest/gtest.h>

#include "loom/common/error.h"
#include "loom/plan/cluster.h"
#include "loom/plan/transformer.h"
#include "loom/plan/transformer_model.h"

namespace loom::plan {
namespace {

Transformer llama(int64_t layers, int64_t h, int64_t heads, int64_t kv, int64_t ffn, int64_t vocab,
                  int64_t seq = 4096) {
  Transformer m{layers, h, heads, seq, vocab, false};
  m.arch = Arch::Llama;
  m.kv_heads = kv;
  m.ffn = ffn;
  return m;
}

TEST(Llama, ParametersOfPublishedModels) {
  // Llama 2 7B (32 layers, 4096, 32 heads, SwiGLU 11008, 32000 tokens): 6,738,415,616.
  EXPECT_DOUBLE_EQ(total_params(llama(32, 4096, 32, 32, 11008, 32000)), 6738415616.0);
  // Llama 3 8B (8 key/value heads, SwiGLU 14336, 128256 tokens): 8,030,261,248.
  EXPECT_DOUBLE_EQ(total_params(llama(32, 4096, 32, 8, 14336, 128256)), 8030261248.0);
  // Tied (Llama 3.2 1B: 16 layers, 2048, 32 heads, 8 kv, 8192): 1,235,814,400.
  Transformer tied = llama(16, 2048, 32, 8, 8192, 128256);
  tied.tied = true;
  EXPECT_DOUBLE_EQ(total_params(tied), 1235814400.0);
}

TEST(Llama, DefaultSwiGluWidthIsTheRuntimes) {
  // ceil(8 * 4096 / 3) = 10923, rounded up to a multiple of 64: 10944.
  EXPECT_DOUBLE_EQ(ffn_width(llama(1, 4096, 32, 0, 0, 32000)), 10944.0);
  EXPECT_DOUBLE_EQ(kv_width(llama(1, 4096, 32, 0, 0, 32000)), 4096.0);  // kv 0 = heads
  EXPECT_DOUBLE_EQ(kv_width(llama(1, 4096, 32, 8, 0, 32000)), 1024.0);
}

TEST(Llama, FlopsByParts) {
  const Transformer m = llama(32, 4096, 32, 8, 14336, 128256, 8192);
  const double s = 8192, h = 4096, kv = 1024, f = 14336;
  EXPECT_DOUBLE_EQ(layer_forward_flops(m, 2),
                   2 * 2 * s * (h * (2 * h + 2 * kv) + 3 * h * f) + 4 * 2 * s * s * h);
  for (bool rc : {false, true})
    EXPECT_DOUBLE_EQ(iteration_flops(m, 16, rc), (rc ? 4 : 3) * 32 * layer_forward_flops(m, 16) +
                                                     3 * head_forward_flops(m, 16));
}

TEST(Llama, ActivationsKeptPerLayer) {
  // h 128, 4 heads, 2 key/value heads (kv width 64), SwiGLU 384, s 64, b 1, 4-byte values.
  const Transformer m = llama(4, 128, 4, 2, 384, 256, 64);
  const double tokens = 64, e = 4;
  LayerRun r;
  r.elem_bytes = e;
  // Norms 6h = 768, q/k/v + attention output + SwiGLU 2h + 2kv + 4f = 1920 values; the core's
  // probabilities a·s = 256 and repeated key/value heads 2 (h - kv) = 128.
  EXPECT_DOUBLE_EQ(layer_kept_bytes(m, 1, r), tokens * (768 + 1920 + 256 + 128) * e);
  r.recompute = Recompute::Selective;  // the core's values live only inside the backward
  EXPECT_DOUBLE_EQ(layer_kept_bytes(m, 1, r), tokens * (768 + 1920) * e);
  EXPECT_DOUBLE_EQ(attention_square_bytes(m, 1, r), tokens * 256 * e);
  // ... beside the backward's first gradients (residual h, gate and up 2f, the down product's
  // weight gradient h·f), which are more here.
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 1, r), (tokens * (128 + 2 * 384) + 128 * 384) * e);
  r.recompute = Recompute::Full;  // the layer's input
  EXPECT_DOUBLE_EQ(layer_kept_bytes(m, 1, r), tokens * 128 * e);
  // tp 2: the norms' values whole, the rest halved.
  r = LayerRun{2, false, Recompute::None, Attention::Standard, e};
  EXPECT_DOUBLE_EQ(layer_kept_bytes(m, 1, r), tokens * (768 + (1920 + 256 + 128) / 2.0) * e);
  // With sequence parallelism everything halved: the norms' values too, the weighted ones
  // included (the products keep this rank's part of their input, 6h/t = 384).
  r.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_kept_bytes(m, 1, r), tokens * (384 + (1920 + 256 + 128) / 2.0) * e);
  // Flash: no probabilities; the fp32 log-sum-exp per head (4) and the kernel's output (h).
  r = LayerRun{1, false, Recompute::None, Attention::Flash, e};
  EXPECT_DOUBLE_EQ(layer_kept_bytes(m, 1, r), tokens * ((768 + 1920 + 128) * e + 4 * 4 + 128 * e));
}

TEST(Llama, RefusesWhatTheRuntimeRefuses) {
  const Cluster c = load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/a100-80gb.toml");
  Parallel p;
  p.tp = 4;
  // 2 key/value heads do not split over tp 4.
  EXPECT_THROW(TransformerCostModel(llama(8, 1024, 16, 2, 2816, 32000, 2048), p, c), UsageError);
  EXPECT_FALSE(splits_over(llama(8, 1024, 16, 2, 2816, 32000), 4));
  EXPECT_TRUE(splits_over(llama(8, 1024, 16, 4, 2816, 32000), 4));
  // A tied head: one matrix on one stage; across stages a copy on the last (V·h fp32).
  Transformer tied = llama(8, 1024, 16, 4, 2816, 32000, 2048);
  tied.tied = true;
  p.tp = 1;
  p.pp = 2;
  EXPECT_DOUBLE_EQ(TransformerCostModel(tied, p, c).tied_copy_bytes(), 32000.0 * 1024 * 4);
  p.pp = 1;
  EXPECT_DOUBLE_EQ(TransformerCostModel(tied, p, c).tied_copy_bytes(), 0.0);
}

// A cluster file with one measured block of each kind for a model (loom profile's format).
std::string profiled_cluster(const std::string& model_lines) {
  std::string text = R"(
name = "tiny"
[node]
devices = 2
shared = true
[device]
memory_gb = 16
memory_bandwidth_gbs = 100
precision = "fp32"
peak_tflops = { fp32 = 1.0 }
[efficiency]
gemm_size = [64, 1024]
gemm = [0.5, 1.0]
elementwise = 1.0
[intra]
bandwidth_gbs = 10
latency_us = 2
[inter]
bandwidth_gbs = 1
latency_us = 20
)";
  for (const char* kind : {"embedding", "layer", "head"})
    text += std::string("[[block]]\nkind = \"") + kind + "\"\n" + model_lines +
            "width = 128\nseq_len = 64\nheads = 4\nvocab = 256\nmicro_batch = 1\n"
            "forward_ms = 1\nbackward_ms = 2\nactivation_mb = 0.5\n";
  return text;
}

TEST(Llama, ProfiledBlocksAreItsOwn) {
  const Cluster gpt_blocks = parse_cluster(profiled_cluster(""), "gpt.toml");
  const Cluster llama_blocks = parse_cluster(
      profiled_cluster("model = \"llama\"\nkv_heads = 2\nffn_width = 384\n"), "llama.toml");
  EXPECT_EQ(llama_blocks.blocks[1].model, "llama");
  EXPECT_EQ(llama_blocks.blocks[1].kv_heads, 2);
  // Written back as read.
  const Cluster again = parse_cluster(to_toml(llama_blocks), "again.toml");
  EXPECT_EQ(again.blocks[1].model, "llama");
  EXPECT_EQ(again.blocks[1].ffn_width, 384);

  Parallel p;
  const Transformer lm = llama(4, 128, 4, 2, 384, 256, 64);
  Transformer gpt{4, 128, 4, 64, 256, false};
  EXPECT_EQ(TransformerCostModel(lm, p, llama_blocks).compute_source(), "profiled");
  EXPECT_EQ(TransformerCostModel(lm, p, gpt_blocks).compute_source(), "analytic");
  EXPECT_EQ(TransformerCostModel(gpt, p, llama_blocks).compute_source(), "analytic");
  EXPECT_EQ(TransformerCostModel(gpt, p, gpt_blocks).compute_source(), "profiled");
  // Another key/value head count or SwiGLU width is another block.
  EXPECT_EQ(
      TransformerCostModel(llama(4, 128, 4, 4, 384, 256, 64), p, llama_blocks).compute_source(),
      "analytic");
  EXPECT_EQ(
      TransformerCostModel(llama(4, 128, 4, 2, 512, 256, 64), p, llama_blocks).compute_source(),
      "analytic");
  try {  // another model's blocks: one line naming the key
    parse_cluster(profiled_cluster("model = \"bert\"\n"), "bert.toml");
    ADD_FAILURE() << "a block of model bert was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("must be gpt or llama"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::plan
