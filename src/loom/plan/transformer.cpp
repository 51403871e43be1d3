#include "loom/plan/transformer.h"

#include "loom/common/error.h"

namespace loom::plan {

Transformer transformer_of(const config::ModelConfig& c) {
  if (!config::is_transformer(c.kind))
    LOOM_USAGE("the simulator models gpt and llama transformers, got model.kind '", c.kind, "'");
  if (c.head_bias)
    LOOM_USAGE("the simulator models heads without a bias; drop model.head_bias to simulate");
  Transformer m{c.layers, c.width, c.heads, c.seq_len, c.vocab, false};
  if (c.kind == config::ModelKind::Llama) {
    m.arch = Arch::Llama;
    m.kv_heads = c.kv_heads;
    m.ffn = config::llama_ffn_width(c);
  }
  m.tied = c.tie_embeddings;
  return m;
}

bool has_dropout(const Transformer& m) {
  return m.dropout && m.arch == Arch::Gpt;
}

int64_t kv_heads_of(const Transformer& m) {
  return m.kv_heads ? m.kv_heads : m.heads;
}

double kv_width(const Transformer& m) {
  if (m.arch == Arch::Gpt) return double(m.hidden);
  const int64_t head_width = m.hidden / m.heads;  // heads divide the width (checked)
  return double(kv_heads_of(m) * head_width);
}

double ffn_width(const Transformer& m) {
  if (m.arch == Arch::Gpt) return 4.0 * double(m.hidden);
  if (m.ffn > 0) return double(m.ffn);
  config::ModelConfig c;
  c.width = m.hidden;
  return double(config::llama_ffn_width(c));
}

bool splits_over(const Transformer& m, int tp) {
  if (m.heads % tp || m.hidden % tp) return false;
  if (m.arch == Arch::Gpt) return true;
  return kv_heads_of(m) % tp == 0 && int64_t(ffn_width(m)) % tp == 0 && m.vocab % tp == 0;
}

double layer_matrix_params(const Transformer& m) {
  const double h = double(m.hidden);
  if (m.arch == Arch::Gpt) return 12 * h * h;
  return h * (2 * h + 2 * kv_width(m)) + 3 * h * ffn_width(m);
}

double layer_params(const Transformer& m) {
  const double h = double(m.hidden);
  if (m.arch == Arch::Gpt) return layer_matrix_params(m) + 13 * h;  // biases, 2 LayerNorms
  return layer_matrix_params(m) + 2 * h;                            // 2 RMSNorm weights
}

double embedding_params(const Transformer& m) {
  const double positions = m.arch == Arch::Gpt ? double(m.seq_len) * m.hidden : 0;
  return double(m.vocab) * m.hidden + positions;
}

double head_params(const Transformer& m) {
  const double norm = (m.arch == Arch::Gpt ? 2.0 : 1.0) * m.hidden;
  return norm + (m.tied ? 0 : double(m.vocab) * m.hidden);
}

double total_params(const Transformer& m) {
  return embedding_params(m) + double(m.layers) * layer_params(m) + head_params(m);
}

double layer_params_per_rank(const Transformer& m, int tp) {
  // GPT: 2 LayerNorms (4h) and the proj's and out's biases (2h) replicated; Llama: 2 norms.
  const double replicated = (m.arch == Arch::Gpt ? 6.0 : 2.0) * double(m.hidden);
  return (layer_params(m) - replicated) / tp + replicated;
}

double embedding_params_per_rank(const Transformer& m, int tp) {
  const double positions = embedding_params(m) - double(m.vocab) * m.hidden;
  return double(m.vocab) * m.hidden / tp + positions;
}

double head_params_per_rank(const Transformer& m, int tp) {
  const double norm = (m.arch == Arch::Gpt ? 2.0 : 1.0) * m.hidden;
  return (head_params(m) - norm) / tp + norm;
}

double layer_forward_flops(const Transformer& m, double b) {
  const double s = double(m.seq_len), h = double(m.hidden);
  return 2 * b * s * layer_matrix_params(m) + 4 * b * s * s * h;
}

double head_forward_flops(const Transformer& m, double b) {
  return 2 * b * double(m.seq_len) * double(m.hidden) * double(m.vocab);
}

double iteration_flops(const Transformer& m, double B, bool recompute) {
  const double s = double(m.seq_len), h = double(m.hidden), l = double(m.layers),
               V = double(m.vocab);
  if (m.arch != Arch::Gpt)  // the same count by parts: 3 passes, 4 with the recomputation
    return (recompute ? 4 : 3) * l * layer_forward_flops(m, B) + 3 * head_forward_flops(m, B);
  if (recompute) return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

double attention_square_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.attention == Attention::Flash) return 0;
  const double s = double(m.seq_len), a = double(m.heads);
  const double c_a = has_dropout(m) ? 5 : 2;  // per a·s²·b at 2-byte values
  return c_a * a * s * s * b / r.tp * r.elem_bytes / 2;
}

namespace {

// Llama's per-layer bytes other than the attention core's (transformer.h).
double llama_linear_bytes(const Transformer& m, double b, const LayerRun& r) {
  const double h = double(m.hidden), sb = double(m.seq_len) * b, t = r.tp;
  // The two RMSNorms' input and normalized values (residual precision) and weighted values
  // (the products' input); with sequence parallelism this rank's part of each (the products
  // gather theirs again in the backward).
  const double norms =
      (4 * h * r.residual() + 2 * h * r.elem_bytes) / (r.sequence_parallel ? t : 1);
  const double split = 2 * h + 2 * kv_width(m) + 4 * ffn_width(m);
  return sb * (norms + split / t * r.elem_bytes);
}

// Key/value heads repeated for the query heads (grouped-query attention), kept by the core.
double repeated_kv_bytes(const Transformer& m, double b, const LayerRun& r) {
  const double h = double(m.hidden);
  return double(m.seq_len) * b * 2 * (h - kv_width(m)) / r.tp * r.elem_bytes;
}

// Per-layer bytes other than the s² terms, for the three layouts (Korthikanti Table 2), the
// two LayerNorms' inputs at residual precision.
double linear_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (m.arch != Arch::Gpt) return llama_linear_bytes(m, b, r);
  const double sbh = double(m.seq_len) * b * double(m.hidden), t = r.tp;
  const double c_h = has_dropout(m) ? 34 : 32;     // per s·b·h at 2-byte values
  const double unsplit = has_dropout(m) ? 10 : 8;  // LayerNorms, dropout masks, GEMM inputs
  const double norms = 2 * r.residual();           // the LayerNorms' inputs, 4 of those 34
  const double kept_whole = (unsplit - 4) * r.elem_bytes / 2 + norms;
  const double split = (c_h - unsplit) * r.elem_bytes / 2;
  if (r.tp <= 1) return sbh * (kept_whole + split);
  if (r.sequence_parallel) return sbh / t * (kept_whole + split);
  return sbh * (kept_whole + split / t);
}

// Flash keeps the log-sum-exp of each head and token in fp32 for its backward; loom's Llama
// also keeps the kernel's output, whose heads-to-tokens reshape is a copy (measured).
double flash_kept_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.attention != Attention::Flash) return 0;
  const double output = m.arch == Arch::Llama ? double(m.hidden) * r.elem_bytes : 0;
  return (4 * double(m.heads) + output) * double(m.seq_len) * b / r.tp;
}

// The MLP's share of linear_bytes: the second norm's values, the first product's input and
// the hidden values (GPT: before and after the GELU; Llama: gate, silu, up and product).
double mlp_kept_bytes(const Transformer& m, double b, const LayerRun& r) {
  const double M = double(m.seq_len) * b, h = double(m.hidden), t = r.tp, F = ffn_width(m) / t;
  const double e = r.elem_bytes, sp = r.sequence_parallel ? t : 1;
  if (m.arch == Arch::Gpt) return M * ((h * r.residual() + h * e) / sp + 2 * F * e);
  return M * ((2 * h * r.residual() + h * e) / sp + 4 * F * e);
}

}  // namespace

double layer_kept_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.recompute == Recompute::Full) {  // the layer's input
    const double sbh = double(m.seq_len) * b * double(m.hidden);
    return sbh * r.residual() / (r.sequence_parallel ? r.tp : 1);
  }
  const double core = r.recompute == Recompute::Selective
                          ? 0
                          : attention_square_bytes(m, b, r) + repeated_kv_bytes(m, b, r);
  return linear_bytes(m, b, r) + core + flash_kept_bytes(m, b, r);
}

// The backward's first steps, the MLP's from the top (measured against loom's allocator:
// planner-validation.md): the residual stream's gradient [M, h] stays until the layer is done
// (a cast of it feeds the products in bf16); the last product's input gradient [M, f/t] is
// made while that product's weight gradient [h, f/t] is; the SwiGLU's backward then holds two
// [M, f/t] gradients (gate and up) at once.
double layer_backward_gradient_bytes(const Transformer& m, double b, const LayerRun& r) {
  const double M = double(m.seq_len) * b, h = double(m.hidden), f = ffn_width(m) / r.tp;
  const double e = r.elem_bytes, residual = r.residual();
  double bytes = M * h * residual / (r.sequence_parallel ? r.tp : 1);
  if (residual != e) bytes += M * h * e;
  if (r.split_input) {
    // I keeps the gradient of the hidden values (the first product's output: W's input)
    // beside the last product's input gradient that made it; the SwiGLU two (gate and up).
    // Under sequence parallelism the last product's output gradient is gathered whole, and
    // kept for W.
    const double gathered = r.sequence_parallel && r.tp > 1 ? M * h * e : 0;
    return bytes + (m.arch == Arch::Gpt ? 2 : 3) * M * f * e + gathered;
  }
  bytes += (m.arch == Arch::Gpt ? 1 : 2) * M * f * e;
  if (r.weight_grad_temp) bytes += new_weight_grad_bytes(h * f, e);
  // Sequence parallelism keeps a product's input as this rank's part: its weight gradient
  // gathers the whole input again (Megatron-LM does too).
  if (r.sequence_parallel && r.tp > 1) bytes += M * h * e;
  return bytes;
}

double attention_core_backward_bytes(const Transformer& m, double b, const LayerRun& r) {
  if (r.attention == Attention::Flash) return 0;
  const double s = double(m.seq_len), e = r.elem_bytes;
  // The product's backward makes the probabilities' gradient, loom's softmax the scores'
  // beside it; Megatron-LM's fused softmax overwrites the first.
  double per_value = r.megatron_core ? e : 2 * e;
  if (has_dropout(m)) per_value += e;  // the dropout's backward: a second gradient beside
  return per_value * double(m.heads) * s * s * b / r.tp;
}

double attention_phase_bytes(const Transformer& m, double b, const LayerRun& r) {
  const double M = double(m.seq_len) * b, h = double(m.hidden), t = r.tp, F = ffn_width(m) / t;
  const double e = r.elem_bytes, sp = r.sequence_parallel ? t : 1;
  const double gated = m.arch == Arch::Gpt ? 1 : 2;  // SwiGLU: gate and up
  const double residual = M * h * r.residual() / sp;
  const double value_heads = M * h / t * e;  // the query heads' (grouped-query: repeated)
  const double held = residual + value_heads + attention_core_backward_bytes(m, b, r);
  const double mlp_kept = mlp_kept_bytes(m, b, r);
  // The fused backward has freed the MLP's kept values and the output product's input.
  if (!r.split_input) return held - mlp_kept - M * h / t * e;
  // I keeps W's inputs (the MLP products' inputs) and the products' output gradients: the
  // MLP's two (GPT; the SwiGLU's three) and the output product's.
  const double weight_inputs = M * (h * e / sp + F * e);
  const double output_gradients = M * (gated * F * e + h * e) + M * h * e;
  return held - (mlp_kept - weight_inputs) + output_gradients;
}

double layer_working_bytes(const Transformer& m, double b, const LayerRun& r) {
  const double gradients = layer_backward_gradient_bytes(m, b, r);
  // A recomputed part's backward holds the gradient coming in until the part's gradients are
  // out; Megatron-LM's (torch.autograd.backward on the outputs) holds the recomputed output
  // too, loom's (the engine from the output's node) does not.
  const double M = double(m.seq_len) * b, h = double(m.hidden), t = r.tp, e = r.elem_bytes;
  const double outputs_held = r.megatron_core ? 2 : 1;
  if (r.recompute == Recompute::Full) {
    LayerRun kept = r;
    kept.recompute = Recompute::None;
    const double output = M * h * r.residual() / (r.sequence_parallel ? t : 1);
    // loom's recomputed layer hands its weight gradients (new tensors, fp32) back with its
    // input's: the MLP's two and the output product's are held by the attention core.
    const double F = ffn_width(m) / t, fp32 = r.weight_grad_temp ? 4 : 0;
    // The recomputed values, less the first norm's input: the kept input itself.
    return layer_kept_bytes(m, b, kept) - output +
           std::max(gradients + (outputs_held - 1) * output, attention_phase_bytes(m, b, kept) +
                                                                 outputs_held * output +
                                                                 (2 * h * F + h * h / t) * fp32);
  }
  if (r.recompute == Recompute::Selective) {
    // The core's s² values again, its incoming gradient (and output), and loom's q, k and v in
    // heads (copied again from the kept projection).
    const double heads = r.megatron_core ? 0 : M * (h + 2 * kv_width(m)) / t * e;
    const double core = attention_square_bytes(m, b, r) + repeated_kv_bytes(m, b, r) +
                        outputs_held * M * h / t * e + heads;
    return std::max(gradients, core + attention_phase_bytes(m, b, r));
  }
  return std::max(gradients, attention_phase_bytes(m, b, r));
}

double new_weight_grad_bytes(double values, double elem_bytes) {
  return values * (elem_bytes + (elem_bytes < 4 ? 4 : 0));
}

double layer_buffer_bytes(const Transformer& m, Attention attention) {
  const double s = double(m.seq_len);
  double bytes = attention == Attention::Standard ? 4 * s * s : 0;
  const int64_t head_width = m.hidden / m.heads;  // heads divide the width (checked)
  if (m.arch == Arch::Llama) bytes += 2 * 4 * s * double(head_width);
  return bytes;
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
