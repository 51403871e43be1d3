#include "loom/plan/transformer.h"

#include "loom/common/error.h"

namespace loom::plan {

double layer_params(const Transformer& m) {
  const double h = double(m.hidden);
  return 12 * h * h + 13 * h;
}

double embedding_params(const Transformer& m) {
  return double(m.vocab) * m.hidden + double(m.seq_len) * m.hidden;
}

double head_params(const Transformer& m) {
  return double(m.vocab) * m.hidden + 2.0 * m.hidden;
}

double total_params(const Transformer& m) {
  return embedding_params(m) + double(m.layers) * layer_params(m) + head_params(m);
}

double layer_forward_flops(const Transformer& m, double b) {
  const double s = double(m.seq_len), h = double(m.hidden);
  return 24 * b * s * h * h + 4 * b * s * s * h;
}

double head_forward_flops(const Transformer& m, double b) {
  return 2 * b * double(m.seq_len) * double(m.hidden) * double(m.vocab);
}

double iteration_flops(const Transformer& m, double B, bool recompute) {
  const double s = double(m.seq_len), h = double(m.hidden), l = double(m.layers),
               V = double(m.vocab);
  if (recompute) return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

double attention_square_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.attention == Attention::Flash) return 0;
  const double s = double(m.seq_len), a = double(m.heads);
  const double c_a = m.dropout ? 5 : 2;  // per a·s²·b at 2-byte values
  return c_a * a * s * s * b / r.tp * r.elem_bytes / 2;
}

namespace {

// Per-layer bytes other than the s² terms, for the three layouts (Korthikanti Table 2).
double linear_bytes(const Transformer& m, double b, const LayerRun& r) {
  const double sbh = double(m.seq_len) * b * double(m.hidden), t = r.tp;
  const double c_h = m.dropout ? 34 : 32;     // per s·b·h
  const double unsplit = m.dropout ? 10 : 8;  // LayerNorms, dropout masks, GEMM inputs
  const double scale = r.elem_bytes / 2;
  if (r.tp <= 1) return sbh * c_h * scale;
  if (r.sequence_parallel) return sbh / t * c_h * scale;
  return sbh * (unsplit + (c_h - unsplit) / t) * scale;
}

// Flash keeps the log-sum-exp of each head and token in fp32 for its backward.
double flash_stats_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.attention != Attention::Flash) return 0;
  return 4 * double(m.heads) * double(m.seq_len) * b / r.tp;
}

}  // namespace

double layer_kept_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.recompute == Recompute::Full) {
    const double sbh = double(m.seq_len) * b * double(m.hidden);
    return 2 * sbh * r.elem_bytes / 2 / (r.sequence_parallel ? r.tp : 1);
  }
  const double core = r.recompute == Recompute::Selective ? 0 : attention_square_bytes(m, b, r);
  return linear_bytes(m, b, r) + core + flash_stats_bytes(m, b, r);
}

double layer_working_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.recompute == Recompute::Full) {
    LayerRun kept = r;
    kept.recompute = Recompute::None;
    return layer_kept_bytes(m, b, kept);
  }
  if (r.recompute == Recompute::Selective) return attention_square_bytes(m, b, r);
  return 0;
}

double layer_activation_bytes(const Transformer& m, double b, int tp, bool sp, bool recompute,
                              double elem_bytes) {
  return layer_kept_bytes(
      m, b,
      {tp, sp, recompute ? Recompute::Full : Recompute::None, Attention::Standard, elem_bytes});
}

StateBytes state_bytes_per_param(DpMode mode, int dp) {
  const double d = dp;
  switch (mode) {
    case DpMode::AllReduce: return {2, 2, 12};
    case DpMode::Zero1: return {2, 2, 12 / d};
    case DpMode::Zero2: return {2, 2 / d, 12 / d};
    case DpMode::Zero3: return {2 / d, 2 / d, 12 / d};
    default: check_simulated(mode);
  }
  LOOM_CHECK(false, "unreachable");
}

}  // namespace loom::plan
