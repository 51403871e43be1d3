#include "loom/plan/parallel.h"

#include <algorithm>

#include "loom/common/error.h"

namespace loom::plan {

void check_simulated(DpMode m, bool from_config) {
  if (config::exact_dp(m)) return;
  if (m == DpMode::PowerSgd)
    LOOM_USAGE("dp-mode powersgd is not simulated; simulate allreduce, zero1-3, slim, quant, ",
               "diloco or streaming-diloco");
  if (!from_config)
    LOOM_USAGE("dp-mode ", m,
               " is simulated from a training configuration (its settings live there): loom "
               "simulate --from-config FILE --dp-mode ",
               m);
}

void check_planned(DpMode m) {
  if (!config::exact_dp(m))
    LOOM_USAGE("the planner searches allreduce, zero1, zero2 and zero3, got dp-mode ", m,
               "; loom simulate --from-config predicts one configuration of it");
}

namespace {

// Bytes per value of a blockwise-quantized message (quantize.h: bits per code, one fp32 scale
// per block), as a fraction of fp32.
double quantized_fraction(int64_t bits, int64_t block) {
  return (double(bits) / 8 + 4.0 / double(block)) / 4;
}

}  // namespace

LightDp light_dp(const config::Config& cfg) {
  LightDp l;
  switch (cfg.parallel.dp_mode) {
    case DpMode::Quant: {
      // x = grad + e, encode, decode what was sent, e = x - decoded (about 34 bytes per
      // value), then the shard's pieces decoded, summed, re-encoded and the gathered mean
      // decoded (about 10).
      // The two phases (all-to-all of the shards, all-gather of the means) move half each.
      const int64_t gather = cfg.quant.gather_bits > 0 ? cfg.quant.gather_bits : cfg.quant.bits;
      l.reduce = (quantized_fraction(cfg.quant.bits, cfg.quant.block) +
                  quantized_fraction(gather, cfg.quant.block)) /
                 2;
      l.state_bytes = 4 + 4 + 2 * 4 * l.reduce;  // residual, x, the two exchange buffers
      l.codec_bytes = 44;
      break;
    }
    case DpMode::Slim: {
      const config::SlimConfig& s = cfg.slim;
      const double sel = std::min(1.0, s.core + s.explore);
      // Every full_sync-th sync moves every coordinate.
      const double per_sync =
          s.full_sync > 0 ? ((double(s.full_sync) - 1) * sel + 1) / double(s.full_sync) : sel;
      l.reduce = 0;
      l.sync = per_sync / double(s.period);
      // g and u, the index sets (8 bytes per selected index) and the mask.
      l.state_bytes = 4 + 4 + 8 * sel + 1;
      // Per sync, on the selected coordinates: delta = w - g, g += mean, w = g, u updated
      // (about 36 bytes each); every refresh-th sync the significance of every coordinate
      // (about 24 bytes each).
      l.codec_bytes = (36 * per_sync + 24 / double(s.refresh)) / double(s.period);
      break;
    }
    case DpMode::Diloco:
    case DpMode::StreamingDiloco: {
      const config::DilocoConfig& d = cfg.diloco;
      const bool streaming = cfg.parallel.dp_mode == DpMode::StreamingDiloco;
      const double wire =
          streaming && d.outer_bits < 32 ? quantized_fraction(d.outer_bits, 256) : 1;
      l.reduce = 0;
      l.sync = wire / double(d.inner_steps);
      l.overlap_steps = streaming ? double(d.overlap) : 0;
      // g, the outer gradient and the outer momentum (+ quantized buffers).
      l.state_bytes = 12 + (wire < 1 ? 4 + 2 * 4 * wire : 0);
      // Per outer step: delta = g - w, the Nesterov step on g, w = g (about 44 bytes each).
      l.codec_bytes = (44 + (wire < 1 ? 44 : 0)) / double(d.inner_steps);
      break;
    }
    case DpMode::PowerSgd: check_simulated(DpMode::PowerSgd, true); break;
    default: break;
  }
  return l;
}

schedule::DpMode lowering_mode(DpMode m, int dp) {
  if (dp <= 1) return schedule::DpMode::None;
  return m == DpMode::Zero3 ? schedule::DpMode::ZeroParams : schedule::DpMode::Reduce;
}

DpMode parse_dp_mode(const std::string& text) {
  std::optional<DpMode> m = config::parse_choice<DpMode>(text);
  if (!m)
    LOOM_USAGE("dp-mode must be allreduce, zero1, zero2, zero3, slim, quant, diloco, ",
               "streaming-diloco or powersgd, got '", text, "'");
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

Precision precision(const std::string& name, bool megatron) {
  if ((name == "bf16" || name == "fp16") && megatron) return {name, 2, 2, 12, 2, 2, false, false};
  // loom's state is fp32's whatever the compute type; its activations are in bf16 but for
  // the residual stream.
  if (name == "bf16" || name == "fp16") return {name, 4, 4, 8, 2, 4, true, true};
  if (name == "fp32") return {name, 4, 4, 8, 4, 4, true, true};
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
  if (placement != config::RankOrder::DpInside && dp > 1 && pp > 1)
    s += " " + config::name_of(placement);
  return s;
}

}  // namespace loom::plan
