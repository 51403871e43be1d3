#include "loom/plan/parallel.h"

#include "loom/common/error.h"

namespace loom::plan {

void check_simulated(DpMode m) {
  if (!config::exact_dp(m))
    LOOM_USAGE("dp-mode ", m,
               " is not simulated; the planner models allreduce, zero1, zero2 "
               "and zero3");
}

schedule::DpMode lowering_mode(DpMode m, int dp) {
  if (dp <= 1) return schedule::DpMode::None;
  return m == DpMode::Zero3 ? schedule::DpMode::ZeroParams : schedule::DpMode::Reduce;
}

DpMode parse_dp_mode(const std::string& text) {
  std::optional<DpMode> m = config::parse_choice<DpMode>(text);
  if (!m || !config::exact_dp(*m))
    LOOM_USAGE("dp-mode must be allreduce, zero1, zero2 or zero3 (the compressing and ",
               "low-communication modes are not simulated), got '", text, "'");
  return *m;
}

Attention parse_attention(const std::string& text) {
  if (text == "standard") return Attention::Standard;
  if (text == "flash") return Attention::Flash;
  LOOM_USAGE("--attention must be standard or flash, got '", text, "'");
}

std::string name_of(Attention a) {
  return a == Attention::Flash ? "flash" : "standard";
}

Recompute parse_recompute(const std::string& text) {
  std::optional<Recompute> r = config::parse_choice<Recompute>(text);
  if (!r) LOOM_USAGE("--recompute must be none, selective or full, got '", text, "'");
  return *r;
}

Precision precision(const std::string& name) {
  if (name == "bf16" || name == "fp16") return {name, 2, 2, 12, 2, false, false};
  if (name == "fp32") return {name, 4, 4, 8, 4, true, true};
  LOOM_USAGE("precision must be bf16, fp16 or fp32, got '", name, "'");
}

std::string Parallel::describe() const {
  std::string s = detail::concat("dp=", dp, " pp=", pp, " tp=", tp, " ", schedule);
  if (loops > 1) s += detail::concat(" v=", loops);
  s += detail::concat(" m=", microbatches, " b=", micro_batch);
  if (dp > 1 && !distributed_optimizer) s += " " + config::name_of(dp_mode);
  if (recompute != Recompute::None) s += " recompute=" + config::name_of(recompute);
  if (attention == Attention::Flash) s += " flash";
  if (tp_comm_overlap && tp > 1) s += " tp-overlap";
  if (distributed_optimizer && dp > 1) s += " distopt";
  if (sequence_parallel && tp > 1) s += " sp";
  return s;
}

}  // namespace loom::plan
