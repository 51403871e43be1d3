// Closed forms of the analytic transformer model, and the Megatron-LM 1T point.
#include "loom/plan/transformer.h"

#include <gtest/gtest.h>

#include "loom/common/error.h"
#include "loom/plan/evaluate.h"
#include "loom/plan/transformer_model.h"

namespace loom::plan {
namespace {

// GPT-3 175B shapes: s = 2048, h = 12288, a = 96.
const Transformer kGpt3{96, 12288, 96, 2048, 51200, true};
// A small GPT: 8 layers, h = 1024, 16 heads, s = 1024.
const Transformer kSmallGpt{8, 1024, 16, 1024, 51200, true};

TEST(Transformer, ActivationBytesKorthikanti) {
  const double sbh = 2048.0 * 12288;
  // No TP: s b h (34 + 5 a s / h) = sbh (34 + 80).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, 1, 1, false, false), sbh * 114);
  // TP 8: s b h (10 + 24/8 + 5 a s / (8 h)) = sbh (13 + 10).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, 1, 8, false, false), sbh * 23);
  // TP 8 + sequence parallelism: s b h / 8 (34 + 80).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, 1, 8, true, false), sbh * 114 / 8);
  // Full recomputation keeps the layer input: 2 s b h (/t with sequence parallelism).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, 1, 8, false, true), sbh * 2);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, 1, 8, true, true), sbh * 2 / 8);
  // Linear in the micro-batch; 4-byte values double it; no dropout: 32 + 2 a s / h.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, 4, 1, false, false), 4 * sbh * 114);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, 1, 1, false, false, 4), 2 * sbh * 114);
  Transformer plain = kGpt3;
  plain.dropout = false;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(plain, 1, 1, false, false), sbh * (32 + 32));
}

TEST(Transformer, FlopsNarayanan) {
  // Per iteration = sum over layers and head of forward x (3, or 4 with recomputation of
  // the layers; the head is not recomputed).
  for (bool rc : {false, true}) {
    const double B = 1536, b = 1;
    const double by_parts = B / b *
                            ((rc ? 4 : 3) * kGpt3.layers * layer_forward_flops(kGpt3, b) +
                             3 * head_forward_flops(kGpt3, b));
    EXPECT_NEAR(iteration_flops(kGpt3, B, rc) / by_parts, 1.0, 1e-12) << rc;
  }
  EXPECT_NEAR(layer_params(kGpt3) * kGpt3.layers / 1e9, 174.0, 0.5);
}

TEST(Transformer, StateBytesPerDpMode) {
  EXPECT_DOUBLE_EQ(state_bytes_per_param(DpMode::AllReduce, 8).total(), 16.0);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(DpMode::Zero1, 8).total(), 2 + 2 + 1.5);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(DpMode::Zero2, 8).total(), 2 + 0.25 + 1.5);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(DpMode::Zero3, 8).total(), 2.0);
}

Cluster a100() {
  return load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/a100-80gb.toml");
}

// The cost model's per-rank memory follows the byte counts and shards over dp (Megatron-LM's
// mixed precision); loom's bf16 keeps the state of its fp32 runs (autocast over fp32
// parameters, gradients and moments).
TEST(TransformerModel, MemoryPerDpMode) {
  Cluster c = a100();
  const Transformer& m = kSmallGpt;
  Parallel p;
  p.dp = 4;
  p.pp = 2;
  for (DpMode mode : {DpMode::AllReduce, DpMode::Zero1, DpMode::Zero2, DpMode::Zero3}) {
    p.dp_mode = mode;
    p.megatron = false;
    const StageMemory loom_bf16 = TransformerCostModel(m, p, c, "bf16").memory(1);
    const StageMemory loom_fp32 = TransformerCostModel(m, p, c, "fp32").memory(1);
    EXPECT_DOUBLE_EQ(loom_bf16.params + loom_bf16.grads + loom_bf16.optimizer,
                     loom_fp32.params + loom_fp32.grads + loom_fp32.optimizer);
    EXPECT_DOUBLE_EQ(loom_bf16.gathered, loom_fp32.gathered);
    p.megatron = true;
    TransformerCostModel cost(m, p, c);
    const double P = 4 * layer_params(m);  // stage 1: layers 5..8 and the head
    const double want_params = P + head_params(m);
    StageMemory s = cost.memory(1);
    const StateBytes sb = state_bytes_per_param(mode, 4);
    EXPECT_NEAR(s.params + s.grads + s.optimizer, want_params * sb.total(), 1.0);
    EXPECT_DOUBLE_EQ(s.gathered, mode == DpMode::Zero3 ? 2 * want_params : 0.0);
    EXPECT_DOUBLE_EQ(s.grad_buffer, mode >= DpMode::Zero2 ? 2 * want_params : 0.0);
  }
}

// The optimizer step streams its bytes per parameter: AdamW over fp32 values alone for loom's
// state (28), and Megatron-LM's mixed precision around it: gradients to fp32 (2 + 4), their
// norm (4), fp16's unscale-and-check (8), master to model parameters (4 + 2); the distributed
// optimizer's gradients are fp32 already, and its shard is 1/dp of the stage.
TEST(TransformerModel, OptimizerStepBytesPerPrecision) {
  Cluster c = a100();
  Parallel p;
  p.pp = 2;
  p.dp = 4;
  auto seconds_per_param = [&](const Parallel& q, const std::string& precision, double shard) {
    const TransformerCostModel cost(kSmallGpt, q, c, precision);
    const double P = 4 * layer_params(kSmallGpt) + head_params(kSmallGpt);
    return cost.optimizer_s(1) / (P / shard);
  };
  const double byte =
      1 / (c.memory_bandwidth * c.elementwise_efficiency * c.elementwise_in_training);
  EXPECT_NEAR(seconds_per_param(p, "fp32", 1) / byte, 28, 1e-9);
  EXPECT_NEAR(seconds_per_param(p, "bf16", 1) / byte, 28, 1e-9);
  p.megatron = true;
  EXPECT_NEAR(seconds_per_param(p, "fp16", 1) / byte, 52, 1e-9);
  EXPECT_NEAR(seconds_per_param(p, "bf16", 1) / byte, 44, 1e-9);
  p.megatron = false;
  p.distributed_optimizer = true;
  p.dp_mode = DpMode::Zero1;
  EXPECT_NEAR(seconds_per_param(p, "bf16", 4) / byte, 38, 1e-9);
  // A measured AdamW step keeps its measurement; Megatron's passes are added to it.
  c.optimizer_s_per_param = 1e-9;
  p.distributed_optimizer = false;
  p.dp_mode = DpMode::AllReduce;
  p.megatron = true;
  EXPECT_NEAR(seconds_per_param(p, "bf16", 1), 1e-9 + 16 * byte, 1e-18);
}

// Megatron-LM (Narayanan et al. 2021): 1T GPT, h = 25600, l = 128, s = 2048, V = 51200, 160
// heads, 3072 A100-80GB, TP 8, PP 64 (dp 6), batch 3072, micro-batch 1, full recomputation:
// 163 TFLOP/s per GPU, 52% of peak (counting the recomputed forward, as the paper does). The
// paper's reproduction script (Megatron-LM examples/sc21/run_table_1.sh) runs it as plain 1F1B;
// interleaving (2 loops) is checked as well. Not the calibration row (clusters/a100-80gb.toml
// fits Table 1's 530B row); bench/megatron_points.sh reports every published row's error.
TEST(TransformerModel, MegatronOneTrillionPoint) {
  Cluster c = a100();
  Transformer m{128, 25600, 160, 2048, 51200, true};
  for (const char* name : {"1f1b", "interleaved"}) {
    Parallel p;
    p.dp = 6;
    p.pp = 64;
    p.tp = 8;
    p.loops = std::string(name) == "1f1b" ? 1 : 2;
    p.microbatches = 512;
    p.micro_batch = 1;
    p.schedule = name;
    p.recompute = Recompute::Full;
    p.megatron = true;  // Megatron-LM's memory (loom's fp32 residual stream needs more)
    Evaluation e = evaluate(m, p, c);
    EXPECT_NEAR(e.tflops_per_gpu, 163.0, 0.15 * 163.0) << name;
    EXPECT_NEAR(e.mfu, 0.52, 0.15 * 0.52) << name;
    EXPECT_LT(e.sim.peak_memory(), 80e9) << name;
  }
}

// The A100 file's one fitted constant (gemm_in_training) reproduces the row it was fitted to:
// Narayanan et al. 2021 Table 1's 530B GPT, 2520 A100s, t = 8, p = 35, 1 layer per virtual
// stage (v = 3), batch 2520, micro-batch 1, full recomputation, fp16, Megatron-LM 2021's
// exchanges and reduction after the flush: 163 TFLOP/s per GPU. A change of the cost model that
// moves this point needs the constant refitted and bench/megatron_points.sh's table regenerated.
TEST(TransformerModel, MegatronCalibrationRowHolds) {
  const Transformer m{105, 20480, 128, 2048, 51200, true};
  Parallel p;
  p.dp = 9;
  p.pp = 35;
  p.tp = 8;
  p.loops = 3;
  p.microbatches = 280;
  p.micro_batch = 1;
  p.schedule = "interleaved";
  p.recompute = Recompute::Full;
  p.megatron = true;
  EvalOptions o;
  o.precision = "fp16";  // the paper's runs (CONFIG.sh --fp16): the loss scale's pass too
  o.blocking_p2p = true;
  o.grad_reduce_after_flush = true;
  const Evaluation e = evaluate(m, p, a100(), o);
  EXPECT_NEAR(e.tflops_per_gpu, 163.0, 0.002 * 163.0);  // the fit's resolution, 0.001 of the share
}

// A head tied to the token embedding (Megatron-LM's GPT): on one stage one matrix; on a
// pipeline under --megatron the last stage keeps a copy (an untied head's state) and
// all-reduces its gradient, V·h/t values in the gradients' precision, with the first stage's;
// loom's last stage multiplies by a copy that is no parameter.
TEST(TransformerModel, TiedHeadOnOneStageOrACopy) {
  const Cluster c = a100();
  Transformer tied = kSmallGpt, untied = kSmallGpt;
  tied.tied = true;
  untied.tied = false;
  Parallel p;
  p.tp = 4;
  p.megatron = true;
  const double matrix = 51200.0 * 1024 / 4;  // this rank's share of V·h
  const TransformerCostModel one_stage(tied, p, c, "fp16"), one_untied(untied, p, c, "fp16");
  EXPECT_DOUBLE_EQ(one_untied.memory(0).params - one_stage.memory(0).params, matrix * 2);
  EXPECT_DOUBLE_EQ(one_stage.tied_grad_bytes(), 0.0);
  p.pp = 2;
  const TransformerCostModel copy(tied, p, c, "fp16"), apart(untied, p, c, "fp16");
  EXPECT_DOUBLE_EQ(copy.memory(1).params, apart.memory(1).params);
  EXPECT_DOUBLE_EQ(copy.tied_grad_bytes(), matrix * 2);
  EXPECT_DOUBLE_EQ(apart.tied_grad_bytes(), 0.0);
  // loom's copy (parallel/tied_head.h): fp32 values and gradient on the last stage, no
  // optimizer state, and V·h/t fp32 values each way. At fp32 the values and gradient weigh
  // what an untied head's do; the optimizer state is the head's less.
  p.megatron = false;
  const TransformerCostModel loom(tied, p, c, "fp32"), loom_untied(untied, p, c, "fp32");
  EXPECT_DOUBLE_EQ(loom.tied_copy_bytes(), matrix * 4);
  EXPECT_DOUBLE_EQ(loom.tied_grad_bytes(), 0.0);
  EXPECT_DOUBLE_EQ(loom_untied.tied_copy_bytes(), 0.0);
  EXPECT_DOUBLE_EQ(loom.memory(1).params, loom_untied.memory(1).params);
  EXPECT_DOUBLE_EQ(loom.memory(1).grads, loom_untied.memory(1).grads);
  const StageMemory head = loom_untied.memory(1);
  EXPECT_DOUBLE_EQ(head.optimizer - loom.memory(1).optimizer,
                   matrix * 4 * head.optimizer / head.params);
  EXPECT_DOUBLE_EQ(loom.memory(0).params, loom_untied.memory(0).params);  // the embedding
}

// A pipeline message per tensor-parallel rank (b = 2, s = 1024, h = 1024, bf16 under
// --megatron, loom's fp32 residual stream otherwise): loom's runtime sends the whole tensor
// from every rank without sequence parallelism and its part with it; Megatron-LM sends a 1/t
// slice and the receivers all-gather it (receive_s), but not under sequence parallelism.
TEST(TransformerModel, PipelineMessagesPerTensorParallelRank) {
  const Cluster c = a100();
  Parallel p;
  p.pp = 2;
  p.tp = 4;
  p.micro_batch = 2;
  auto bytes = [&] { return TransformerCostModel(kSmallGpt, p, c).boundary_bytes(0); };
  auto gather_s = [&] { return TransformerCostModel(kSmallGpt, p, c).receive_s(0); };
  const double tensor = 2.0 * 1024 * 1024;  // values
  EXPECT_DOUBLE_EQ(bytes(), tensor * 4);
  EXPECT_DOUBLE_EQ(gather_s(), 0.0);
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(bytes(), tensor * 4 / 4);
  p.megatron = true;
  EXPECT_DOUBLE_EQ(bytes(), tensor * 2 / 4);
  EXPECT_DOUBLE_EQ(gather_s(), 0.0);
  p.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(bytes(), tensor * 2 / 4);
  // The gather of the whole bf16 tensor over the 4 ranks of one node's NVLink.
  EXPECT_DOUBLE_EQ(gather_s(), Network(c).collective_s(Collective::AllGather, tensor * 2,
                                                       p.mesh().tp_group(0, 0)));
  EXPECT_GT(gather_s(), 0.0);
}

// The A100 file with every block of a width-128 GPT measured at micro-batches 2 and 4:
// forward 2 and 3 ms, backward 4 and 6 ms.
Cluster profiled_at_2_and_4() {
  Cluster c = a100();
  for (const char* kind : {"embedding", "layer", "head"}) {
    c.blocks.push_back({kind, 128, 64, 4, 256, 2, 0.002, 0.004});
    c.blocks.push_back({kind, 128, 64, 4, 256, 4, 0.003, 0.006});
  }
  return c;
}

// Profiled block times replace the analytic ones (tp = 1), linear in the micro-batch.
TEST(TransformerModel, ProfiledBlocks) {
  Cluster c = profiled_at_2_and_4();
  Transformer m{2, 128, 4, 64, 256, false};
  Parallel p;
  p.pp = 1;
  p.micro_batch = 3;  // halfway between 2 and 4
  TransformerCostModel cost(m, p, c);
  EXPECT_EQ(cost.compute_source(), "profiled");
  // one stage: embedding + 2 layers + head, forward 2.5 ms each
  EXPECT_NEAR(cost.compute_s(0, schedule::Kind::F), 4 * 0.0025, 1e-12);
  EXPECT_NEAR(cost.compute_s(0, schedule::Kind::B), 4 * 0.005, 1e-12);
  p.micro_batch = 8;  // proportional beyond the largest measured size
  TransformerCostModel big(m, p, c);
  EXPECT_NEAR(big.compute_s(0, schedule::Kind::F), 4 * 0.006, 1e-12);
  // Measured activation bytes replace the formula (linear in the micro-batch as well).
  for (auto& b : c.blocks) b.activation_bytes = 1e6 * b.micro_batch;
  p.micro_batch = 3;
  EXPECT_NEAR(TransformerCostModel(m, p, c).memory(0).activation, 4 * 3e6, 1e-3);
}

// What the profile measured an action to cost beyond its blocks (a layer's action_ms) comes
// once per compute action, whatever blocks the stage runs, interpolated in the micro-batch.
TEST(TransformerModel, ProfiledActionCostOncePerAction) {
  Cluster c = profiled_at_2_and_4();
  Transformer m{4, 128, 4, 64, 256, false};
  Parallel p;
  p.pp = 2;
  p.micro_batch = 3;
  const TransformerCostModel without(m, p, c);
  c.blocks[2].action_s = 0.0002;  // the layer at micro-batch 2
  c.blocks[3].action_s = 0.0004;  // and at 4: 0.3 ms at 3
  const TransformerCostModel with(m, p, c);
  using schedule::Kind;
  for (int s = 0; s < 2; ++s)  // embedding + 2 layers, 2 layers + head
    for (Kind k : {Kind::F, Kind::B, Kind::I, Kind::W})
      EXPECT_NEAR(with.compute_s(s, k) - without.compute_s(s, k), 0.0003, 1e-12);
  // A stage of the head alone runs actions too.
  const TransformerCostModel head_alone(m, p, c, "", {0, 5});
  EXPECT_NEAR(head_alone.compute_s(1, Kind::F), 0.0025 + 0.0003, 1e-12);
  // The cluster file keeps it (written for the layer only).
  const Cluster d = parse_cluster(to_toml(c), "action.toml");
  EXPECT_DOUBLE_EQ(d.blocks[2].action_s, 0.0002);
  EXPECT_DOUBLE_EQ(d.blocks[0].action_s, 0.0);
  EXPECT_NE(to_toml(c).find("action_ms = 0.2\n"), std::string::npos);
}

// Under tensor parallelism each block's measured (tp = 1) time is scaled by the analytic
// model's ratio of its tp = 2 part to the whole, and the tp collectives are added as modelled.
// One block per stage (embedding, layer, head) of a one-layer model, micro-batches of 2.
struct OneBlockPerStage {
  const Cluster plain = a100();
  const Transformer m{1, 128, 4, 64, 256, false};
  const std::vector<int> cut = {0, 1, 2};
  const char* kinds[3] = {"embedding", "layer", "head"};
  Parallel p;
  OneBlockPerStage() {
    p.pp = 3;
    p.micro_batch = 2;
  }
};

TEST(TransformerModel, ProfiledBlocksScaledToTensorParallelism) {
  OneBlockPerStage one_each;
  const auto& [plain, m, cut, kinds, p_] = one_each;
  Parallel p = p_;
  const TransformerCostModel one(m, p, plain, "", cut);
  p.tp = 2;
  const TransformerCostModel two(m, p, plain, "", cut);
  Cluster c = plain;
  const double measured_f[] = {0.001, 0.004, 0.002}, measured_b[] = {0.003, 0.009, 0.005};
  for (int k = 0; k < 3; ++k)
    c.blocks.push_back({kinds[k], 128, 64, 4, 256, 2, measured_f[k], measured_b[k]});
  const TransformerCostModel scaled(m, p, c, "", cut);
  EXPECT_EQ(scaled.compute_source(), "profiled at tp 1, scaled to tp 2 by the analytic model");
  using schedule::Kind;
  for (int k = 0; k < 3; ++k) {
    const double comm = two.compute_comm_s(k, Kind::F);
    EXPECT_NEAR(
        scaled.compute_s(k, Kind::F),
        (two.compute_s(k, Kind::F) - comm) * measured_f[k] / one.compute_s(k, Kind::F) + comm,
        1e-12)
        << kinds[k];
    EXPECT_NEAR(scaled.compute_comm_s(k, Kind::F), comm, 1e-15) << kinds[k];
  }
  EXPECT_GT(two.compute_comm_s(1, Kind::F), 0);  // the layer's all-reduces are in it
  // An action's cost beyond its blocks is scaled as the layer's forward compute is.
  c.blocks[1].action_s = 0.0005;
  const TransformerCostModel with_action(m, p, c, "", cut);
  const double ratio =
      (scaled.compute_s(1, Kind::F) - scaled.compute_comm_s(1, Kind::F)) / measured_f[1];
  for (int k = 0; k < 3; ++k)
    EXPECT_NEAR(with_action.compute_s(k, Kind::B) - scaled.compute_s(k, Kind::B), 0.0005 * ratio,
                1e-12)
        << kinds[k];
  EXPECT_LT(ratio, 1.0);
}

// Bytes: a block measured at tp 1 counts what its forward allocates (its output, not its
// received input, which the simulator then holds: received_input). Scaled to tp 2 it gives
// times only: the bytes are the analytic ones (a layer's input, the stage's output added).
TEST(TransformerModel, ProfiledBytesOnlyAtTheirOwnDegree) {
  OneBlockPerStage one_each;
  const auto& [plain, m, cut, kinds, p_] = one_each;
  Parallel p = p_;
  Cluster c = plain;
  for (int k = 0; k < 3; ++k) {
    c.blocks.push_back({kinds[k], 128, 64, 4, 256, 2, 0.001, 0.002});
    c.blocks.back().activation_bytes = 1e6;
  }
  const TransformerCostModel measured(m, p, c, "", cut);
  EXPECT_DOUBLE_EQ(measured.memory(1).activation, 1e6);
  EXPECT_DOUBLE_EQ(measured.memory(1).received_input, measured.boundary_bytes(0));
  EXPECT_DOUBLE_EQ(measured.memory(0).received_input, 0.0);  // stage 0 receives nothing
  p.tp = 2;
  const TransformerCostModel analytic(m, p, plain, "", cut), scaled(m, p, c, "", cut);
  EXPECT_DOUBLE_EQ(scaled.memory(1).activation, analytic.memory(1).activation);
  EXPECT_DOUBLE_EQ(scaled.memory(1).received_input, 0.0);
}

// loom's layers share one causal mask (fp32, s²) and a Llama's rotary tables: a rank holds one
// copy whatever its stages, and a stage without layers none.
TEST(TransformerModel, LayersShareTheirTablesOnARank) {
  const Cluster c = a100();
  Parallel p;
  p.pp = 2;
  p.loops = 2;
  p.microbatches = 4;
  p.schedule = "interleaved";
  const double mask = 4.0 * 1024 * 1024;
  const TransformerCostModel cost(kSmallGpt, p, c);
  for (int s = 0; s < cost.stages(); ++s) EXPECT_DOUBLE_EQ(cost.memory(s).buffers, mask);
  const Evaluation e = evaluate(kSmallGpt, p, c);
  EXPECT_NEAR(e.sim.ranks[0].peak.params, cost.memory(0).params + cost.memory(2).params + mask,
              1.0);
  p.attention = Attention::Flash;
  EXPECT_DOUBLE_EQ(TransformerCostModel(kSmallGpt, p, c).memory(0).buffers, 0.0);
  p.megatron = true;  // Megatron-LM builds its mask per batch
  p.attention = Attention::Standard;
  EXPECT_DOUBLE_EQ(TransformerCostModel(kSmallGpt, p, c).memory(0).buffers, 0.0);
  Transformer llama = kSmallGpt;
  llama.arch = Arch::Llama;
  EXPECT_DOUBLE_EQ(layer_buffer_bytes(llama, Attention::Flash), 2 * 4.0 * 1024 * 64);
  Parallel one;
  one.pp = 2;
  one.microbatches = 2;
  const TransformerCostModel head_alone(kSmallGpt, one, c, "", {0, 9});
  EXPECT_DOUBLE_EQ(head_alone.memory(0).buffers, mask);
  EXPECT_DOUBLE_EQ(head_alone.memory(1).buffers, 0.0);
}

// Blocks the profile measured as tp shards (tp = 2) are used as they are, with the modelled
// collectives on top; tp = 1 blocks of the same shape are then not scaled, and a run at tp = 1
// does not read the shards.
TEST(TransformerModel, ProfiledTensorParallelShards) {
  OneBlockPerStage one_each;
  const auto& [plain, m, cut, kinds, p_] = one_each;
  Parallel p = p_;
  p.tp = 2;
  const TransformerCostModel analytic(m, p, plain, "", cut);
  Cluster c = plain;
  const double shard_f[] = {0.001, 0.004, 0.002}, shard_b[] = {0.003, 0.009, 0.005};
  for (int k = 0; k < 3; ++k) {
    c.blocks.push_back({kinds[k], 128, 64, 4, 256, 2, 10 * shard_f[k], 10 * shard_b[k]});
    c.blocks.push_back({kinds[k], 128, 64, 4, 256, 2, shard_f[k], shard_b[k]});
    c.blocks.back().tp = 2;
  }
  const TransformerCostModel shards(m, p, c, "", cut);
  EXPECT_EQ(shards.compute_source(), "profiled as tp 2 shards");
  using schedule::Kind;
  for (int k = 0; k < 3; ++k) {
    const double comm_f = analytic.compute_comm_s(k, Kind::F);
    EXPECT_NEAR(shards.compute_s(k, Kind::F), shard_f[k] + comm_f, 1e-12) << kinds[k];
    const double comm_b = analytic.compute_comm_s(k, Kind::B);
    EXPECT_NEAR(shards.compute_s(k, Kind::B), shard_b[k] + comm_b, 1e-12) << kinds[k];
  }
  p.tp = 1;
  const TransformerCostModel whole(m, p, c, "", cut);
  EXPECT_NEAR(whole.compute_s(1, Kind::F), 10 * shard_f[1], 1e-12);
  // The shard's degree survives the cluster file (tp = 1 is not written).
  const Cluster d = parse_cluster(to_toml(c), "tp.toml");
  ASSERT_EQ(d.blocks.size(), 6u);
  EXPECT_EQ(d.blocks[0].tp, 1);
  EXPECT_EQ(d.blocks[1].tp, 2);
  const std::string text = to_toml(c);
  size_t written = 0;
  for (size_t at = text.find("\ntp = "); at != std::string::npos; at = text.find("\ntp = ", at + 1))
    ++written;
  EXPECT_EQ(written, 3u);  // the three shards
}

// A measured I/W split (here I + W > B) replaces the halves of B. The embedding has no matrix
// product: its whole backward is in I, as the runtime runs it (model/linear_uses.h).
TEST(TransformerModel, ProfiledInputWeightSplit) {
  Cluster c = a100();
  Transformer m{2, 128, 4, 64, 256, false};
  for (const char* kind : {"embedding", "layer", "head"}) {
    const bool emb = std::string(kind) == "embedding";
    c.blocks.push_back(
        {kind, 128, 64, 4, 256, 2, 0.002, 0.004, emb ? 0.0 : 0.003, emb ? 0.0 : 0.002});
    // (I + W = 5 ms > B = 4 ms for the layers and the head)
  }
  Parallel p;
  p.pp = 2;
  p.micro_batch = 2;
  TransformerCostModel cost(m, p, c);
  // Two blocks per stage (equal forwards): embedding + layer, layer + head.
  ASSERT_NEAR(cost.compute_s(0, schedule::Kind::F), 2 * 0.002, 1e-12);
  ASSERT_NEAR(cost.compute_s(1, schedule::Kind::F), 2 * 0.002, 1e-12);
  // Stage 1: I 3 ms and W 2 ms per block; B stays the measured fused backward.
  EXPECT_NEAR(cost.compute_s(1, schedule::Kind::I), 2 * 0.003, 1e-12);
  EXPECT_NEAR(cost.compute_s(1, schedule::Kind::W), 2 * 0.002, 1e-12);
  EXPECT_NEAR(cost.compute_s(1, schedule::Kind::B), 2 * 0.004, 1e-12);
  // Stage 0: I the embedding's backward and the layer's I, W the layer's W.
  EXPECT_NEAR(cost.compute_s(0, schedule::Kind::I), 0.004 + 0.003, 1e-12);
  EXPECT_NEAR(cost.compute_s(0, schedule::Kind::W), 0.002, 1e-12);
  EXPECT_NEAR(cost.compute_s(0, schedule::Kind::B), 2 * 0.004, 1e-12);
  EXPECT_NEAR(cost.loaded_slowdown(0), 1.0, 1e-12);  // no slowdown measured: none invented
  // Without the split, I = W = B / 2 on the other stages.
  for (auto& b : c.blocks) b.input_s = b.weight_s = 0;
  TransformerCostModel halves(m, p, c);
  EXPECT_NEAR(halves.compute_s(1, schedule::Kind::I), 2 * 0.002, 1e-12);
  EXPECT_NEAR(halves.compute_s(0, schedule::Kind::I), 0.004 + 0.002, 1e-12);
}

// Shared cores: compute times are the blocks' times alone; a stage's slowdown with every core
// busy is its blocks' slowdowns weighted by their times.
TEST(TransformerModel, LoadedSlowdownOnSharedCores) {
  Cluster c = a100();
  Transformer m{2, 128, 4, 64, 256, false};
  const double slow[] = {1.0, 2.0, 1.5};  // embedding, layer, head
  const char* kinds[] = {"embedding", "layer", "head"};
  for (int k = 0; k < 3; ++k) {
    c.blocks.push_back({kinds[k], 128, 64, 4, 256, 2, 0.002, 0.004});
    c.blocks.back().loaded_slowdown = slow[k];
  }
  Parallel p;
  p.pp = 1;
  p.micro_batch = 4;  // beyond the measured size: times grow, the ratio stays
  TransformerCostModel dedicated(m, p, c);
  EXPECT_EQ(dedicated.shared_cores(), 0);
  c.shared = true;
  TransformerCostModel shared(m, p, c);
  EXPECT_EQ(shared.shared_cores(), c.devices_per_node);
  EXPECT_NEAR(shared.compute_s(0, schedule::Kind::F), 4 * 0.004, 1e-12);  // not slowed here
  // Every block takes the same time: (1 + 2 + 2 + 1.5) / 4.
  EXPECT_NEAR(shared.loaded_slowdown(0), 1.625, 1e-12);
  // Round trip through the cluster file.
  Cluster d = parse_cluster(to_toml(c), "x.toml");
  ASSERT_EQ(d.blocks.size(), 3u);
  EXPECT_DOUBLE_EQ(d.blocks[1].loaded_slowdown, 2.0);
  EXPECT_DOUBLE_EQ(d.blocks[0].loaded_slowdown, 1.0);
  EXPECT_TRUE(d.shared);
}

// Ranks outnumbering the cores: each compute is slowed beyond its fair share by what the
// profile measured there, times the CPU the runtime spends beside the compute (which the same
// cores run); a machine whose devices are the ranks' own is slowed by neither.
TEST(TransformerModel, OversubscribedCoresRunTheRuntimeToo) {
  Cluster c = a100();
  c.oversubscribed = 1.1;
  c.runtime_cpu = 1.2;
  Parallel p;
  EXPECT_DOUBLE_EQ(TransformerCostModel(kSmallGpt, p, c).oversubscribed(), 1.0);
  c.shared = true;
  EXPECT_NEAR(TransformerCostModel(kSmallGpt, p, c).oversubscribed(), 1.32, 1e-12);
  const Cluster d = parse_cluster(to_toml(c), "x.toml");
  EXPECT_DOUBLE_EQ(d.runtime_cpu, 1.2);
  EXPECT_DOUBLE_EQ(d.oversubscribed, 1.1);
  c.runtime_cpu = 1;  // the default is not written
  EXPECT_EQ(to_toml(c).find("runtime_cpu"), std::string::npos);
  EXPECT_DOUBLE_EQ(parse_cluster(to_toml(c), "x.toml").runtime_cpu, 1.0);
}

TEST(TransformerModel, UniformCut) {
  EXPECT_EQ(uniform_cut(8, 4), (std::vector<int>{0, 3, 5, 7}));
  EXPECT_EQ(uniform_cut(7, 3), (std::vector<int>{0, 4, 6}));
  EXPECT_THROW(uniform_cut(2, 3), UsageError);
}

}  // namespace
}  // namespace loom::plan
