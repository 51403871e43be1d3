#include "loom/plan/parallel.h"

#include "loom/common/error.h"

namespace loom::plan {

std::string dp_mode_name(DpMode m) {
  switch (m) {
    case DpMode::AllReduce:
      return "allreduce";
    case DpMode::Zero1:
      return "zero1";
    case DpMode::Zero2:
      return "zero2";
    default:
      return "zero3";
  }
}

DpMode parse_dp_mode(const std::string& text) {
  if (text == "allreduce") return DpMode::AllReduce;
  if (text == "zero1") return DpMode::Zero1;
  if (text == "zero2") return DpMode::Zero2;
  if (text == "zero3") return DpMode::Zero3;
  LOOM_USAGE("dp-mode must be allreduce, zero1, zero2 or zero3 (slim and quant are not ",
             "simulated), got '", text, "'");
}

schedule::DpMode lowering_mode(DpMode m, int dp) {
  if (dp <= 1) return schedule::DpMode::None;
  return m == DpMode::Zero3 ? schedule::DpMode::ZeroParams : schedule::DpMode::Reduce;
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
  if (dp > 1) s += " " + dp_mode_name(dp_mode);
  if (recompute) s += " recompute";
  if (sequence_parallel && tp > 1) s += " sp";
  return s;
}

}  // namespace loom::plan
