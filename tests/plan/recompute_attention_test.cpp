// Selective recomputation, flash attention, tensor-parallel overlap and the distributed
// optimizer: the activation bytes and the time terms against values computed by hand.
#include <gtest/gtest.h>

#include "loom/common/error.h"
#include "loom/plan/evaluate.h"
#include "loom/plan/transformer.h"
#include "loom/plan/transformer_model.h"

namespace loom::plan {
namespace {

using schedule::Kind;

// GPT-3 175B shapes: s = 2048, h = 12288, a = 96 (5 a s / h = 80).
const Transformer kGpt3{96, 12288, 96, 2048, 51200, true};
const double kSbh = 2048.0 * 12288;

TEST(Recompute, SelectiveKeepsAllButTheSquareTerms) {
  // Korthikanti et al. 2022, Table 2: selective = 34 s b h, 10 + 24/t with TP, 34/t with SP.
  LayerRun r;
  r.recompute = Recompute::Selective;
  r.weight_grad_temp = false;  // Megatron-LM's: weight gradients accumulate in the product
  r.megatron_core = true;      // and its attention core (fused softmax in place)
  EXPECT_DOUBLE_EQ(layer_kept_bytes(kGpt3, 1, r), kSbh * 34);
  r.tp = 8;
  EXPECT_DOUBLE_EQ(layer_kept_bytes(kGpt3, 1, r), kSbh * 13);
  r.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_kept_bytes(kGpt3, 1, r), kSbh * 34 / 8);
  // The recomputed core lives in the backward only: 5 a s² b / t = s b h · 80 / 8. Inside the
  // core's backward it meets the probabilities' gradient and the dropout's (2 · 2 a s² b / t
  // = s b h · 64 / 8), the residual stream's and the value heads' gradients (2/8 each), less
  // the MLP's kept values (4/8 + 2 · 2 · 4/8) and the output product's input (2/8), all freed
  // by then. The backward's first gradients (the residual stream's 2/t, the MLP's 2 · 4/t
  // and the input that a weight gradient gathers whole again under sequence parallelism, 2)
  // are fewer.
  const double gradients = kSbh * ((2.0 + 8) / 8 + 2);
  EXPECT_DOUBLE_EQ(layer_backward_gradient_bytes(kGpt3, 1, r), gradients);
  const double core_phase = kSbh * (64.0 + 2 + 2 - 4 - 16 - 2) / 8;
  EXPECT_DOUBLE_EQ(attention_core_backward_bytes(kGpt3, 1, r), kSbh * 64 / 8);
  EXPECT_DOUBLE_EQ(attention_phase_bytes(kGpt3, 1, r), core_phase);
  // With the core's recomputed output and the gradient coming in (2/8 each), held to its end.
  EXPECT_DOUBLE_EQ(layer_working_bytes(kGpt3, 1, r), kSbh * (10 + 4.0 / 8) + core_phase);
  EXPECT_DOUBLE_EQ(attention_square_bytes(kGpt3, 1, r), kSbh * 10);
  // None keeps it, full keeps only the input and recomputes the whole layer (34/t + 80/t).
  r.recompute = Recompute::None;
  EXPECT_DOUBLE_EQ(layer_kept_bytes(kGpt3, 1, r), kSbh * 114 / 8);
  EXPECT_DOUBLE_EQ(layer_working_bytes(kGpt3, 1, r), core_phase);
  r.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(layer_kept_bytes(kGpt3, 1, r), kSbh * 2 / 8);
  // The recomputed layer's output and the gradient coming in (2/8 each) are held to its end;
  // its first norm's input is the kept input (2/8 less).
  EXPECT_DOUBLE_EQ(layer_working_bytes(kGpt3, 1, r), kSbh * (114 + 4.0 - 2) / 8 + core_phase);
  // loom's GPT (no dropout, 4-byte values): 32 s b h x 2, working 2 a s² b x 2 and the core's
  // backward: the probabilities' gradient and the scores' (2 a s² b x 2 x 2), the residual's
  // and the value heads' gradients (2 s b h x 4), less the MLP's kept values (10 s b h x 4
  // x 2) and the output product's input (s b h x 2 x 4); the core's incoming gradient (loom
  // drops the recomputed output, Megatron-LM holds it), and q, k and v copied into heads
  // again (4 s b h x 2 x 4).
  Transformer plain = kGpt3;
  plain.dropout = false;
  LayerRun f32{1, false, Recompute::Selective, Attention::Standard, 4};
  f32.weight_grad_temp = false;
  EXPECT_DOUBLE_EQ(layer_kept_bytes(plain, 2, f32), 2 * kSbh * 32 * 2);
  const double square = 2.0 * 96 * 2048 * 2048 * 2 * 2;
  EXPECT_DOUBLE_EQ(layer_working_bytes(plain, 2, f32),
                   square + 2 * square + 2 * kSbh * 4 * (2 - 10 - 1 + 4));
  // bf16 values: the two gradients in bf16 (loom's softmax computes in float32 inside the
  // kernel).
  f32.elem_bytes = 2;
  EXPECT_DOUBLE_EQ(attention_core_backward_bytes(plain, 2, f32), 4.0 * 96 * 2048 * 2048 * 2);
  f32.attention = Attention::Flash;
  EXPECT_DOUBLE_EQ(attention_core_backward_bytes(plain, 2, f32), 0.0);
}

TEST(Attention, FlashKeepsNoSquareTermsButTheSoftmaxStatistics) {
  LayerRun r{8, true, Recompute::None, Attention::Flash, 2};
  r.weight_grad_temp = false;
  // 34 s b h / t plus one fp32 log-sum-exp per head and token: 4 a s b / t.
  const double stats = 4.0 * 96 * 2048 / 8;
  // No s² values: the first gradients only, and the input gathered again (SP).
  const double gradients = kSbh * ((2.0 + 8) / 8 + 2);
  EXPECT_DOUBLE_EQ(layer_kept_bytes(kGpt3, 1, r), kSbh * 34 / 8 + stats);
  EXPECT_DOUBLE_EQ(attention_square_bytes(kGpt3, 1, r), 0.0);
  EXPECT_DOUBLE_EQ(layer_working_bytes(kGpt3, 1, r), gradients);
  r.recompute = Recompute::Full;  // the recomputed layer has no s² values either
  // (loom's does not hold its output; its first norm's input is the kept input, 2/8 less)
  EXPECT_DOUBLE_EQ(layer_working_bytes(kGpt3, 1, r), kSbh * 32 / 8 + stats + gradients);
}

// A device with round numbers: 100 TFLOP/s, every GEMM at half of it, 1000 GB/s at full
// efficiency, flash at 0.4 (forward) and 0.25 (backward) of peak.
Cluster round_cluster(double tp_overlap = 0) {
  Cluster c = parse_cluster(R"(name = "round"
[node]
devices = 8
[device]
memory_gb = 80
memory_bandwidth_gbs = 1000
precision = "bf16"
peak_tflops = { bf16 = 100.0 }
[efficiency]
gemm_size = [1.0]
gemm = [0.5]
elementwise = 1.0
attention_forward = 0.4
attention_backward = 0.25
[intra]
bandwidth_gbs = 100
latency_us = 0
[inter]
bandwidth_gbs = 10
latency_us = 0
)",
                            "round.toml");
  c.tp_overlap = tp_overlap;
  return c;
}

// 2 layers, h = 1024, a = 16, s = 2048, b = 1, one stage.
const Transformer kSmall{2, 1024, 16, 2048, 1024, true};

double stage_s(const Parallel& p, Kind k, const Cluster& c) {
  return TransformerCostModel(kSmall, p, c).compute_s(0, k);
}

TEST(Recompute, SelectiveAddsTheAttentionCoreForwardToTheBackward) {
  const Cluster c = round_cluster();
  Parallel p;
  const double none_b = stage_s(p, Kind::B, c), none_f = stage_s(p, Kind::F, c);
  p.recompute = Recompute::Selective;
  // Per layer: q kᵀ and probabilities x v, 4 b s² h FLOPs at 50 TFLOP/s, and the s² values
  // (5 a s² b bytes) written and read at 1000 GB/s.
  const double core = 4.0 * 2048 * 2048 * 1024 / 50e12;
  const double square = 2 * 5.0 * 16 * 2048 * 2048 / 1000e9;
  EXPECT_NEAR(stage_s(p, Kind::B, c) - none_b, 2 * (core + square), 1e-12);
  EXPECT_NEAR(stage_s(p, Kind::F, c), none_f, 1e-15);  // the forward is unchanged
  // Full recomputation adds the whole forward of each layer instead.
  p.recompute = Recompute::Full;
  const double full_extra = stage_s(p, Kind::B, c) - none_b;
  EXPECT_GT(full_extra, 2 * (core + square));
}

TEST(Attention, FlashTimeFromItsFlopsAtTheKernelEfficiency) {
  const Cluster c = round_cluster();
  Parallel p;
  const double std_f = stage_s(p, Kind::F, c), std_b = stage_s(p, Kind::B, c);
  p.attention = Attention::Flash;
  const double core = 4.0 * 2048 * 2048 * 1024 / 50e12;                 // standard products
  const double square = 2 * 5.0 * 16 * 2048 * 2048 / 1000e9;            // standard s² traffic
  const double flash_f = 0.5 * 4.0 * 2048 * 2048 * 1024 / 40e12;        // causal half at 0.4
  const double flash_b = 2.5 * 0.5 * 4.0 * 2048 * 2048 * 1024 / 25e12;  // 5 products at 0.25
  const double stats = 2 * 4.0 * 16 * 2048 / 1000e9;  // the statistics, written and read
  // (the backward's elementwise traffic is 1.5x the forward's: 3 accesses per element, not 2)
  EXPECT_NEAR(stage_s(p, Kind::F, c) - std_f, 2 * (flash_f + stats - core - square), 1e-12);
  EXPECT_NEAR(stage_s(p, Kind::B, c) - std_b, 2 * (flash_b + 1.5 * (stats - square) - 2 * core),
              1e-12);
  // Selective recomputation adds nothing to flash, whose backward recomputes already.
  const double flash_b_total = stage_s(p, Kind::B, c);
  p.recompute = Recompute::Selective;
  EXPECT_NEAR(stage_s(p, Kind::B, c), flash_b_total, 1e-15);
}

// With kernels measured at several shapes, the one nearest the model's head size (64 here)
// and sequence (2048) times the attention; a kernel of another head size is ignored.
TEST(Attention, FlashTakesTheKernelMeasuredNearestItsShape) {
  Cluster c = round_cluster();
  Parallel p;
  p.attention = Attention::Flash;
  const double f_any = stage_s(p, Kind::F, c), b_any = stage_s(p, Kind::B, c);
  c.attention = {{128, 2048, 0.1, 0.1}, {64, 3000, 0.2, 0.125}};  // 1 and 0.55 away
  const double flops = 0.5 * 4.0 * 2048 * 2048 * 1024;
  EXPECT_NEAR(stage_s(p, Kind::F, c) - f_any, 2 * (flops / 20e12 - flops / 40e12), 1e-12);
  EXPECT_NEAR(stage_s(p, Kind::B, c) - b_any, 2 * 2.5 * (flops / 12.5e12 - flops / 25e12), 1e-12);
}

TEST(TensorParallelOverlap, HidesTheClusterShareUnderTheGemms) {
  Parallel p;
  p.tp = 8;
  p.sequence_parallel = true;
  const Cluster plain = round_cluster(), half = round_cluster(0.5);
  const TransformerCostModel exposed(kSmall, p, plain);
  p.tp_comm_overlap = true;
  const TransformerCostModel hidden(kSmall, p, half);
  // Each layer's 2 collectives per pass (its GEMMs take longer here): half of them hidden.
  // The embedding's collective is not overlapped.
  const Collective ar = Collective::AllReduce;
  const double one = exposed.collective_s(ar, 2048.0 * 1024 * 2, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_NEAR(exposed.compute_comm_s(0, Kind::F) - hidden.compute_comm_s(0, Kind::F),
              2 * 0.5 * 2 * one, 1e-12);
  // Without sequence parallelism there is nothing to overlap: refused with one line.
  p.sequence_parallel = false;
  EXPECT_THROW(TransformerCostModel(kSmall, p, half), UsageError);
  p.sequence_parallel = true;
  EXPECT_THROW(TransformerCostModel(kSmall, p, plain), UsageError);  // no tp_overlap
}

// Sequence parallelism's products keep this rank's part of their input and gather it again in
// the backward (two per layer, one for the head), beside their input-gradient products: a
// device hides what those products cover; shared CPU cores hide nothing.
TEST(SequenceParallel, GathersTheProductInputsAgainInTheBackward) {
  Parallel p;
  p.tp = 8;
  Cluster slow = round_cluster();
  slow.intra.bandwidth = 1e9;  // 1 GB/s: the gathers outlast the products
  const TransformerCostModel without(kSmall, p, slow);
  p.sequence_parallel = true;
  const TransformerCostModel with(kSmall, p, slow);
  const std::vector<int> group = {0, 1, 2, 3, 4, 5, 6, 7};
  const double M = 2048, h = 1024, V = 1024;
  const double gather = with.collective_s(Collective::AllGather, M * h * 2, group);
  auto gemm = [](double m, double n, double k) { return 2 * m * n * k / (0.5 * 100e12); };
  // Per layer the input gradients of qkv (3h/8 x h) and of fc (4h/8 x h); the head's (V/8 x h).
  const double layer_products = gemm(M, h, 3 * h / 8) + gemm(M, h, 4 * h / 8);
  const double head_product = gemm(M, h, V / 8);
  EXPECT_NEAR(with.compute_comm_s(0, Kind::B) - without.compute_comm_s(0, Kind::B),
              2 * (2 * gather - layer_products) + (gather - head_product), 1e-12);
  EXPECT_NEAR(with.compute_comm_s(0, Kind::F), without.compute_comm_s(0, Kind::F), 1e-15);
  Cluster cores = slow;
  cores.shared = true;
  const TransformerCostModel shared(kSmall, p, cores);
  p.sequence_parallel = false;
  const TransformerCostModel shared_without(kSmall, p, cores);
  EXPECT_NEAR(shared.compute_comm_s(0, Kind::B) - shared_without.compute_comm_s(0, Kind::B),
              5 * gather, 1e-12);
  // Fast links (1 TB/s): the products hide the gathers whole.
  Cluster fast = round_cluster();
  fast.intra.bandwidth = 1e12;
  const TransformerCostModel fast_without(kSmall, p, fast);
  p.sequence_parallel = true;
  EXPECT_NEAR(TransformerCostModel(kSmall, p, fast).compute_comm_s(0, Kind::B),
              fast_without.compute_comm_s(0, Kind::B), 1e-15);
}

TEST(DistributedOptimizer, MegatronCoreBytesPerParameter) {
  // 2 (bf16 parameters) + 4 (fp32 gradients) + 12/d (fp32 master, Adam m and v).
  Parallel p;
  p.dp = 8;
  p.dp_mode = DpMode::Zero1;
  p.distributed_optimizer = true;
  const TransformerCostModel cost(kSmall, p, round_cluster());
  const StageMemory m = cost.memory(0);
  const double P = m.params / 2;
  EXPECT_NEAR(m.grads / P, 4.0, 1e-12);
  EXPECT_NEAR(m.optimizer / P, 12.0 / 8, 1e-12);
  EXPECT_NEAR(cost.grad_bytes(0), 4 * P, 1e-3);   // reduce-scattered in fp32
  EXPECT_NEAR(cost.param_bytes(0), 2 * P, 1e-3);  // all-gathered in bf16
  p.dp_mode = DpMode::Zero3;
  EXPECT_THROW(TransformerCostModel(kSmall, p, round_cluster()), UsageError);
}

TEST(Split, LoopedStagesMustDivideTheLayers) {
  Parallel p;
  p.pp = 2;
  p.loops = 2;
  p.microbatches = 2;
  p.schedule = "interleaved";
  EXPECT_THROW(TransformerCostModel(Transformer{6, 1024, 16, 2048, 1024, true}, p, round_cluster()),
               UsageError);
  EXPECT_NO_THROW(
      TransformerCostModel(Transformer{8, 1024, 16, 2048, 1024, true}, p, round_cluster()));
}

// The simulator keeps the backward's working set apart from the kept activations.
TEST(Recompute, KeptActivationsApartFromTheWorkingSet) {
  Parallel p;
  p.microbatches = 2;
  p.recompute = Recompute::Full;
  const Evaluation e = evaluate(kSmall, p, round_cluster());
  const RankResult& r = e.sim.ranks[0];
  const TransformerCostModel cost(kSmall, p, round_cluster());
  // 1F1B on one stage: F0 B0 F1 B1, one micro-batch's kept activations at a time.
  EXPECT_NEAR(r.peak_kept, cost.memory(0).activation, 1.0);
  EXPECT_GT(r.peak.working, 0.0);
  EXPECT_NEAR(r.peak.total(),
              r.peak.params + r.peak.grads + r.peak.optimizer + r.peak.activations + r.peak.working,
              1.0);
}

// A layer's backward starts from the top of its MLP: the residual stream's gradient (and its
// cast to bf16), the last product's input gradient [M, f] and its weight gradient [h, f] (new,
// widened to fp32 from bf16) are held at once; a SwiGLU then holds two [M, f] gradients; with
// sequence parallelism a weight gradient gathers its whole input [M, h] again.
// Measured against loom's allocator on this machine (planner-validation.md).
TEST(Working, LayerBackwardHoldsItsFirstGradients) {
  Transformer m{2, 256, 4, 64, 256, false};
  const double M = 64.0 * 16, h = 256, f = 1024;
  LayerRun r{1, false, Recompute::None, Attention::Standard, 4};
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * 4 + M * f * 4 + h * f * 4);
  r.elem_bytes = 2;
  r.residual_bytes = 4;  // loom's bf16: the residual stream in fp32
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * (4 + 2) + M * f * 2 + h * f * (2 + 4));
  r.residual_bytes = 0;
  r.weight_grad_temp = false;  // Megatron-LM
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * 2 + M * f * 2);
  r.tp = 2;
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * 2 + M * f / 2 * 2);
  r.sequence_parallel = true;  // this rank's part of the residual; the input gathered again
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * 2 / 2 + M * f / 2 * 2 + M * h * 2);
  r.sequence_parallel = false;
  m.arch = Arch::Llama;
  m.ffn = 512;
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * 2 + 2 * M * 256 * 2);
}

// With the head on the stage, the last layer's backward starts once the head's values are
// gone: the stage's working set is the larger of the head's and the layer's less those.
TEST(Working, HeadStageTakesTheLargerPhase) {
  const Transformer m{1, 256, 4, 64, 256, false};
  Parallel p;
  p.microbatches = 1;
  p.micro_batch = 16;
  const Cluster c = round_cluster();
  const TransformerCostModel cost(m, p, c);
  LayerRun r{1, false, Recompute::None, Attention::Standard, 2};
  r.residual_bytes = 4;
  const double M = 1024, h = 256, V = 256;
  const double head_kept = 4 * M * V + (4 + 2) * M * h, head_working = 4 * M * V;
  const double layer = layer_working_bytes(m, 16, r);
  ASSERT_GT(layer - head_kept, head_working);  // the layer's phase is the larger here
  EXPECT_DOUBLE_EQ(cost.memory(0).working, layer - head_kept);
  Transformer two = m;  // embedding and two layers | the head: each stage its own blocks'
  two.layers = 2;
  p.pp = 2;
  const TransformerCostModel split(two, p, c, "", {0, 3});
  EXPECT_DOUBLE_EQ(split.memory(0).working, layer);
  EXPECT_DOUBLE_EQ(split.memory(1).working, head_working);
}

// At longer sequences the layer's backward peaks inside the standard attention core: the
// probabilities' gradient and the scores' (bf16: 4 bytes a value), with the residual stream's
// and the value heads' gradients, once the MLP's kept values are gone (a split backward's I
// keeps W's inputs and the products' output gradients). Without it the planner read loom's
// bf16 peak at s = 256 17% low on one rank, 26% low under zb-h1, when loom's softmax still
// held fp32 copies (planner-validation.md).
TEST(Working, AttentionCoreBackwardCanBeTheLargerPeak) {
  const Transformer m{2, 128, 4, 512, 256, false};
  const double b = 2, M = 512 * b, h = 128, f = 512, core = 4 * 4 * 512.0 * 512 * b;
  LayerRun r{1, false, Recompute::None, Attention::Standard, 2};
  r.residual_bytes = 4;
  const double held = M * h * 4 + M * h * 2 + core, mlp_kept = M * (h * (4 + 2) + 2 * f * 2);
  ASSERT_GT(held - mlp_kept - M * h * 2, layer_backward_gradient_bytes(m, b, r));
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, b, r), held - mlp_kept - M * h * 2);
  r.split_input = true;
  const double weight_inputs = M * (h * 2 + f * 2), output_gradients = M * (f * 2 + h * 2 + h * 2);
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, b, r),
                   held - (mlp_kept - weight_inputs) + output_gradients);
  // Flash attention has no s² gradients: the MLP's first gradients are the peak again.
  r.attention = Attention::Flash;
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, b, r), layer_backward_gradient_bytes(m, b, r));
}

// The I of a split backward (zero-bubble schedules) makes no weight gradient and keeps the
// products' output gradients for W: at the top of the MLP the hidden values' gradient stays
// beside the last product's input gradient that made it (two [M, f]; the SwiGLU's three). On
// the head's stage the layer's phase also holds what the head left for W (its input and the
// logits' gradient). Measured against loom's allocator (planner-validation.md).
TEST(Working, SplitBackwardInputKeepsTheProductGradients) {
  Transformer m{2, 256, 4, 64, 256, false};
  const double M = 64.0 * 16, h = 256, f = 1024;
  LayerRun r{1, false, Recompute::None, Attention::Standard, 4};
  r.split_input = true;
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * 4 + 2 * M * f * 4);
  // Under sequence parallelism: this rank's part of the residual stream's gradient, and the
  // last product's output gradient gathered whole and kept for W (the fp32 zb-h1 run with
  // tp 2 x pp 2 read -3.7% / -3.9% without it).
  LayerRun sp = r;
  sp.tp = 2;
  sp.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_backward_gradient_bytes(m, 16, sp),
                   M * h * 4 / 2 + 2 * M * f / 2 * 4 + M * h * 4);
  r.elem_bytes = 2;
  r.residual_bytes = 4;
  m.arch = Arch::Llama;
  m.ffn = 512;
  EXPECT_DOUBLE_EQ(layer_working_bytes(m, 16, r), M * h * (4 + 2) + 3 * M * 512 * 2);

  const Transformer gpt{1, 256, 4, 64, 256, false};
  Parallel p;
  p.microbatches = 1;
  p.micro_batch = 16;
  const TransformerCostModel cost(gpt, p, round_cluster());
  LayerRun bf16{1, false, Recompute::None, Attention::Standard, 2};
  bf16.residual_bytes = 4;
  bf16.split_input = true;
  const double V = 256, head_kept = 4 * M * V + (4 + 2) * M * h;
  const double head_left = M * h * 2 + M * V * 2;  // W's inputs: the head's input, dlogits
  EXPECT_DOUBLE_EQ(cost.memory(0).working_input,
                   layer_working_bytes(gpt, 16, bf16) - head_kept + head_left);
  // W: the MLP's weight gradient, made new (bf16, widened to fp32).
  EXPECT_DOUBLE_EQ(cost.memory(0).working_weight, h * 1024 * (2 + 4));
  // A recomputed layer's I is its whole backward (weight gradients included); the I holds
  // the weight gradients of the layers above the lowest (fp32) until it is done, and the
  // lowest runs beside the gradient the stage received for its output (its residual type,
  // fp32), which the top layer counted as its own (pp 2 zb-h1: rank 0 -1.9% without it).
  Transformer two = gpt;
  two.layers = 2;
  p.pp = 2;
  p.recompute = Recompute::Full;
  const TransformerCostModel full(two, p, round_cluster(), "", {0, 3});
  EXPECT_DOUBLE_EQ(full.memory(0).working_input,
                   full.memory(0).working + layer_params(two) * 4 + M * h * 4);
  const TransformerCostModel one_layer(two, p, round_cluster(), "", {0, 2});
  EXPECT_DOUBLE_EQ(one_layer.memory(0).working_input, one_layer.memory(0).working);
}

// The loss's backward makes one fp32 [M, V] gradient (loom's cross entropy; libtorch's held
// two, the loss's and log-softmax's input gradient); so do Megatron's fused loss and the
// vocabulary-parallel one ([M, V/t]).
TEST(Head, LossMakesOneLogitGradient) {
  const Transformer wide_vocab{1, 64, 2, 32, 1 << 20, false};
  Parallel p;
  p.microbatches = 1;
  p.micro_batch = 2;
  const double logits = 4.0 * 2 * 32 * (1 << 20);
  EXPECT_DOUBLE_EQ(TransformerCostModel(wide_vocab, p, round_cluster()).memory(0).working, logits);
  p.megatron = true;
  EXPECT_DOUBLE_EQ(TransformerCostModel(wide_vocab, p, round_cluster()).memory(0).working, logits);
  p.megatron = false;
  p.tp = 2;
  EXPECT_DOUBLE_EQ(TransformerCostModel(wide_vocab, p, round_cluster()).memory(0).working,
                   logits / 2);
}

// loom's vocabulary-parallel head (tp 2): after the loss's backward (its two kept [M, V/t]
// values freed, the logits' gradient left) the product's backward holds its input gradient
// [M, h] and a new weight gradient [V/t, h] (bf16, then widened); with sequence parallelism
// also the input gathered again and a contiguous copy (fp32 under loom's bf16), their bf16
// casts and the reduce-scattered part. A wide model with a small vocabulary, where that phase
// is larger than the loss's; the head alone on the second stage.
TEST(Head, VocabularyParallelProductBackward) {
  const Transformer wide{2, 1024, 8, 32, 256, false};
  Parallel p;
  p.microbatches = 1;
  p.micro_batch = 2;
  p.pp = 2;
  p.tp = 2;
  const double M = 64, h = 1024, Vt = 128, logits = 4 * M * Vt, dw = Vt * h * (2 + 4);
  EXPECT_DOUBLE_EQ(TransformerCostModel(wide, p, round_cluster(), "", {0, 3}).memory(1).working,
                   M * h * 2 + dw - logits);
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(TransformerCostModel(wide, p, round_cluster(), "", {0, 3}).memory(1).working,
                   M * h * (2 * 4 + 2 + 2 + 2.0 / 2) + dw - logits);
}

}  // namespace
}  // namespace loom::plan
