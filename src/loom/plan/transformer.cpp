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
  return double(m.vocab) * m.hidden + double(m.vocab) + 2.0 * m.hidden;
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

double layer_activation_bytes(const Transformer& m, double b, int tp, bool sp, bool recompute,
                              double elem_bytes) {
  const double s = double(m.seq_len), h = double(m.hidden), a = double(m.heads), t = tp;
  const double sbh = s * b * h, scale = elem_bytes / 2;
  if (recompute) return 2 * sbh * scale / (sp ? t : 1);
  const double c_h = m.dropout ? 34 : 32;     // per s·b·h
  const double c_a = m.dropout ? 5 : 2;       // per a·s²·b
  const double unsplit = m.dropout ? 10 : 8;  // LayerNorms, dropout masks, GEMM inputs
  if (tp <= 1) return sbh * (c_h + c_a * a * s / h) * scale;
  if (sp) return sbh / t * (c_h + c_a * a * s / h) * scale;
  return sbh * (unsplit + (c_h - unsplit) / t + c_a * a * s / (h * t)) * scale;
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
