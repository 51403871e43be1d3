// The light data-parallel modes in the simulator: what each sends and keeps per parameter
// (plan::light_dp against the closed forms of docs/planner.md) and the bytes a simulated step
// then moves.
#include <gtest/gtest.h>

#include "loom/common/error.h"
#include "loom/plan/evaluate.h"
#include "loom/plan/transformer.h"
#include "loom/plan/transformer_model.h"

namespace loom::plan {
namespace {

config::Config with_mode(config::DpMode m) {
  config::Config c;
  c.parallel.dp_mode = m;
  return c;
}

TEST(LightDp, FractionsPerMode) {
  EXPECT_EQ(light_dp(with_mode(DpMode::AllReduce)), LightDp{});
  EXPECT_EQ(light_dp(with_mode(DpMode::Zero3)), LightDp{});

  config::Config q = with_mode(DpMode::Quant);  // 8 bits, a scale per 256 values
  EXPECT_DOUBLE_EQ(light_dp(q).reduce, (1 + 4.0 / 256) / 4);
  EXPECT_DOUBLE_EQ(light_dp(q).sync, 0.0);
  q.quant.bits = 4;
  q.quant.block = 64;
  EXPECT_DOUBLE_EQ(light_dp(q).reduce, (0.5 + 4.0 / 64) / 4);
  q.quant.bits = 2;  // shards in 2 bits, the gathered mean in 4: each phase half the bytes
  q.quant.gather_bits = 4;
  EXPECT_DOUBLE_EQ(light_dp(q).reduce, ((0.25 + 4.0 / 64) / 4 + (0.5 + 4.0 / 64) / 4) / 2);

  config::Config s = with_mode(DpMode::Slim);  // core 0.2 + explorer 0.1 every step
  EXPECT_DOUBLE_EQ(light_dp(s).reduce, 0.0);
  EXPECT_DOUBLE_EQ(light_dp(s).sync, 0.3);
  s.slim.period = 4;
  s.slim.full_sync = 5;  // 4 syncs of 30 % and one of everything, one sync every 4 steps
  EXPECT_DOUBLE_EQ(light_dp(s).sync, (4 * 0.3 + 1) / 5 / 4);

  config::Config d = with_mode(DpMode::Diloco);
  d.diloco.inner_steps = 10;
  EXPECT_DOUBLE_EQ(light_dp(d).sync, 0.1);
  EXPECT_DOUBLE_EQ(light_dp(d).overlap_steps, 0.0);
  EXPECT_DOUBLE_EQ(light_dp(d).state_bytes, 12.0);

  config::Config st = with_mode(DpMode::StreamingDiloco);  // 4-bit outer gradients, overlap 1
  st.diloco.inner_steps = 10;
  EXPECT_DOUBLE_EQ(light_dp(st).sync, (0.5 + 4.0 / 256) / 4 / 10);
  EXPECT_DOUBLE_EQ(light_dp(st).overlap_steps, 1.0);
  st.diloco.outer_bits = 32;
  EXPECT_DOUBLE_EQ(light_dp(st).sync, 0.1);

  EXPECT_THROW(light_dp(with_mode(DpMode::PowerSgd)), UsageError);
}

TEST(LightDp, OnlyFromATrainingConfiguration) {
  EXPECT_NO_THROW(check_simulated(DpMode::Slim, true));
  EXPECT_THROW(check_simulated(DpMode::Slim, false), UsageError);
  EXPECT_THROW(check_simulated(DpMode::PowerSgd, true), UsageError);
  EXPECT_THROW(check_planned(DpMode::Quant), UsageError);
  EXPECT_NO_THROW(check_planned(DpMode::Zero2));
  EXPECT_EQ(parse_dp_mode("streaming-diloco"), DpMode::StreamingDiloco);
  EXPECT_THROW(parse_dp_mode("slimm"), UsageError);
}

// One simulated step of dp 4 (one stage): rank 0's data-parallel bytes are a ring all-reduce of
// the mode's message, its static memory grows by the mode's state, and the slow link makes the
// heavier modes slower.
TEST(LightDp, SimulatedBytesAndMemory) {
  const Cluster c = load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/this-machine.toml");
  const Transformer m{4, 128, 4, 64, 256, false};
  auto run = [&](const config::Config& cfg) {
    Parallel p;
    p.dp = 4;
    p.microbatches = 2;
    p.micro_batch = 4;
    p.dp_mode = cfg.parallel.dp_mode;
    p.light = light_dp(cfg);
    EvalOptions o;
    o.precision = "fp32";
    return evaluate(m, p, c, o);
  };
  const double P = total_params(m), ring = 2.0 * 3 / 4;
  const Evaluation all = run(with_mode(DpMode::AllReduce));
  EXPECT_NEAR(all.sim.ranks[0].dp_bytes, ring * 4 * P, 1e-6 * P);

  const config::Config q = with_mode(DpMode::Quant);
  const Evaluation quant = run(q);
  EXPECT_NEAR(quant.sim.ranks[0].dp_bytes, ring * 4 * P * light_dp(q).reduce, 1e-6 * P);
  EXPECT_NEAR(quant.sim.ranks[0].peak.optimizer - all.sim.ranks[0].peak.optimizer,
              P * light_dp(q).state_bytes, 1e-6 * P);

  const Evaluation slim = run(with_mode(DpMode::Slim));
  EXPECT_NEAR(slim.sim.ranks[0].dp_bytes, ring * 4 * P * 0.3, 1e-6 * P);

  config::Config d = with_mode(DpMode::Diloco);
  d.diloco.inner_steps = 50;
  const Evaluation diloco = run(d);
  EXPECT_NEAR(diloco.sim.ranks[0].dp_bytes, ring * 4 * P / 50, 1e-6 * P);
  EXPECT_LT(diloco.sim.step_s, all.sim.step_s);

  // Streaming: the same bytes with and without overlap; the overlapped step is no longer.
  config::Config st = with_mode(DpMode::StreamingDiloco);
  st.diloco.inner_steps = 2;
  st.diloco.outer_bits = 32;
  const Evaluation hidden = run(st);
  st.diloco.overlap = 0;
  const Evaluation exposed = run(st);
  EXPECT_NEAR(hidden.sim.ranks[0].dp_bytes, ring * 4 * P / 2, 1e-6 * P);
  EXPECT_DOUBLE_EQ(hidden.sim.ranks[0].dp_bytes, exposed.sim.ranks[0].dp_bytes);
  EXPECT_LE(hidden.sim.step_s, exposed.sim.step_s);
}

}  // namespace
}  // namespace loom::plan
