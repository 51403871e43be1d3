#include "loom/plan/transformer_model.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "loom/common/error.h"

namespace loom::plan {
namespace {

using schedule::Kind;
constexpr int kEmbedding = 0, kLayer = 1, kHead = 2;

// The kind of block `b` of a model with `blocks` blocks (embedding, layers, head).
int block_kind(int b, int blocks) {
  return b == 0 ? kEmbedding : b == blocks - 1 ? kHead : kLayer;
}

// An elementwise backward reads the saved value and the incoming gradient and writes the
// outgoing one: 3 accesses per element where the forward made 2 (write, read by the next op).
constexpr double kBackwardElementwise = 1.5;
const char* kBlockNames[] = {"embedding", "layer", "head"};

}  // namespace

std::vector<int> uniform_cut(int64_t layers, int stages) {
  if (stages < 1) LOOM_USAGE("stages must be >= 1 (got ", stages, ")");
  if (stages > layers)
    LOOM_USAGE("pp x loops = ", stages, " stages but the model has only ", layers,
               " layers; use fewer pipeline ranks or loops");
  std::vector<int> first = {0};
  int64_t at = 1;
  for (int s = 0; s + 1 < stages; ++s) {
    at += layers / stages + (s < layers % stages ? 1 : 0);
    first.push_back(static_cast<int>(at));
  }
  return first;
}

void TransformerCostModel::Cost::add(const Cost& o) {
  f += o.f;
  i += o.i;
  w += o.w;
  split_extra += o.split_extra;
  f_comm += o.f_comm;
  i_comm += o.i_comm;
  params += o.params;
  activation += o.activation;
  weight_inputs += o.weight_inputs;
  working = std::max(working, o.working);
  working_input = std::max(working_input, o.working_input);
  working_weight = std::max(working_weight, o.working_weight);
  loaded += o.loaded;
}

TransformerCostModel::TransformerCostModel(const Transformer& m, const Parallel& p,
                                           const Cluster& c, const std::string& prec,
                                           std::vector<int> cut)
    : m_(m),
      p_(p),
      c_(c),
      net_(c),
      // The distributed optimizer is Megatron-Core's: its run keeps Megatron's precision.
      prec_(::loom::plan::precision(prec.empty() ? c.precision : prec,
                                    p.megatron || p.distributed_optimizer)) {
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.seq_len < 1 || m.vocab < 1)
    LOOM_USAGE("model layers, width, heads, seq-len and vocab must all be >= 1");
  if (m.hidden % m.heads != 0)
    LOOM_USAGE("width ", m.hidden, " must be divisible by heads ", m.heads);
  if (p.tp < 1 || p.dp < 1 || p.pp < 1 || p.loops < 1 || p.microbatches < 1 || p.micro_batch < 1)
    LOOM_USAGE("dp, pp, tp, loops, microbatches and micro-batch size must all be >= 1");
  if (m.heads % p.tp != 0 || m.hidden % p.tp != 0)
    LOOM_USAGE("tp=", p.tp, " must divide heads (", m.heads, ") and width (", m.hidden, ")");
  if (m.arch == Arch::Llama) {
    const int64_t kv = kv_heads_of(m);
    if (kv < 1 || m.heads % kv != 0)
      LOOM_USAGE("kv-heads ", kv, " must divide heads (", m.heads, ")");
    if (!splits_over(m, p.tp))
      LOOM_USAGE("tp=", p.tp, " must divide kv-heads (", kv, "), the SwiGLU width (",
                 int64_t(ffn_width(m)), ") and vocab (", m.vocab, ")");
  }
  if (m.tied && p.pp * p.loops > 1) {
    if (p.megatron) {
      m_.tied = false;
      tied_copy_ = true;
    } else {
      tied_copy_loom_ = true;
    }
  }
  if (p.tp > c.devices_per_node && !c.shared)
    LOOM_USAGE("tp=", p.tp, " exceeds the ", c.devices_per_node, " devices of a node of '", c.name,
               "'; tensor parallelism stays inside a node");
  if (p.tp_comm_overlap && p.tp > 1 && !p.sequence_parallel)
    LOOM_USAGE("--tp-comm-overlap overlaps sequence parallelism's all-gathers and ",
               "reduce-scatters; add --sequence-parallel");
  if (p.tp_comm_overlap && p.tp > 1 && c.tp_overlap <= 0)
    LOOM_USAGE("--tp-comm-overlap: cluster '", c.name, "' (", c.origin,
               ") has no efficiency.tp_overlap; add the share of a collective hidden there");
  if (p.distributed_optimizer) {
    if (p.dp_mode != DpMode::Zero1)
      LOOM_USAGE("the distributed optimizer shards the optimizer state (dp-mode zero1), got ",
                 config::name_of(p.dp_mode));
    // Megatron-Core keeps and reduces the gradients in fp32 under mixed precision
    // (accumulate_allreduce_grads_in_fp32): 2 + 4 + 12/d bytes per parameter.
    if (prec_.grad < 4) prec_.grad = 4;
  }
  peak_ = c.peak(prec_.name == "fp16" && !c.peak_flops.count("fp16") ? "bf16" : prec_.name);

  const int S = p.pp * p.loops;
  // Looped schedules give every rank the same number of layers per stage (as the planner
  // enumerates them); one loop may split unevenly (the first stages take one more).
  if (cut.empty() && p.loops > 1 && m.layers % S != 0)
    LOOM_USAGE(m.layers, " layers do not split into pp x loops = ", p.pp, " x ", p.loops, " = ", S,
               " equal stages; choose pp and loops whose product divides the layers");
  cut_ = cut.empty() ? uniform_cut(m.layers, S) : std::move(cut);
  const int blocks = static_cast<int>(m.layers) + 2;
  if (static_cast<int>(cut_.size()) != S || cut_[0] != 0)
    LOOM_USAGE("the cut must give the first block of each of the ", S, " stages, starting at 0");
  for (int s = 1; s < S; ++s)
    if (cut_[s] <= cut_[s - 1] || cut_[s] >= blocks)
      LOOM_USAGE("cut points must increase within 1..", blocks - 1, " (got stage ", s, " at ",
                 cut_[s], ")");

  // Under tensor parallelism a block's compute is the profile's tp shard when it measured one
  // at this degree (its compute only: the collectives are modelled); otherwise the whole
  // block's measured time scaled by the analytic model's ratio of a tp-th of the block to the
  // whole (what the GEMM curve and the element-wise costs say the split leaves). Either way the
  // modelled tensor-parallel collectives come on top.
  std::unique_ptr<TransformerCostModel> whole;
  if (p.tp > 1) {
    Parallel one = p;
    one.tp = 1;
    one.sequence_parallel = one.tp_comm_overlap = false;
    whole = std::make_unique<TransformerCostModel>(m, one, c, prec, cut_);
  }
  for (int k = 0; k < 3; ++k) {
    block_[k] = analytic(k);
    double slowdown = 1;  // with every core computing (shared cores, measured)
    Cost measured;
    if (p.tp > 1 && profiled(k, &measured, p.tp)) {
      Cost& b = block_[k];
      // The profile's backward has no selective recomputation: the core's forward again in
      // proportion to the measured forward.
      const double extra = k == kLayer ? selective_extra_s() : 0;
      const double f_compute = b.f - b.f_comm;
      b.split_extra = measured.split_extra;
      b.i = measured.i + b.i_comm + (f_compute > 0 ? measured.f * extra / f_compute : 0);
      b.f = measured.f + b.f_comm;
      b.w = measured.w;
      b.action = measured.action;
      slowdown = measured.loaded;
      profiled_[k] = profiled_at_tp_[k] = measured_bytes_[k] = true;
    } else if (p.tp > 1 && profiled(k, &measured)) {
      const Cost one = whole->analytic(k);
      Cost& b = block_[k];
      auto scaled = [](double tp_s, double comm_s, double measured_s, double one_s) {
        return one_s > 0 ? (tp_s - comm_s) * measured_s / one_s + comm_s : tp_s;
      };
      // The profile's backward has no selective recomputation: the core's forward again is
      // scaled as the forward is.
      const double extra = k == kLayer ? selective_extra_s() : 0;
      const double one_i = one.i - (k == kLayer ? whole->selective_extra_s() : 0);
      b.split_extra = one_i > 0 ? measured.split_extra * (b.i - extra - b.i_comm) / one_i : 0;
      b.i = scaled(b.i - extra, b.i_comm, measured.i, one_i) + scaled(extra, 0, measured.f, one.f);
      b.action = scaled(b.f - b.f_comm, 0, measured.action, one.f);  // as the forward
      b.f = scaled(b.f, b.f_comm, measured.f, one.f);
      b.w = scaled(b.w, 0, measured.w, one.w);
      // The embedding's measured bytes (its output, h per token) stand where the layers are
      // measured too (a measured block counts its output, an analytic one its input: the
      // analytic first layer already holds it): tensor parallelism sums the output over the
      // group, every rank keeps all of it (a 1/t share with sequence parallelism).
      Cost layer;
      if (k == kEmbedding && measured.activation >= 0 && profiled(kLayer, &layer, p.tp))
        b.activation = measured.activation / (p.sequence_parallel ? p.tp : 1);
      slowdown = measured.loaded;
      profiled_[k] = true;
    } else if (p.tp == 1 && profiled(k, &measured)) {
      measured.params = block_[k].params;
      measured.weight_inputs = block_[k].weight_inputs;  // not measured: the model's
      // Measured bytes even for a recomputed layer (analytic: its input): the embedding's
      // measured output is then what the first layer keeps.
      measured_bytes_[k] = true;
      if (measured.activation < 0 || (k == kLayer && p.recompute == Recompute::Full)) {
        // not measured, or a recomputed layer (only its input is kept); the embedding and
        // the head are never recomputed: their measured bytes stand
        measured.activation = block_[k].activation;
        measured.working = block_[k].working;
      } else if (k == kLayer && p.recompute == Recompute::Selective) {
        // The measured layer without its s² values; the recomputed core's time in proportion.
        const double square = attention_square_bytes(m_, double(p.micro_batch), layer_run());
        measured.activation = std::max(0.0, measured.activation - square);
        measured.working = block_[k].working;  // the profile measures no working set
        const double f = block_[k].f;
        measured.i += f > 0 ? measured.f * selective_extra_s() / f : 0;
      } else if (k == kLayer && p.attention == Attention::Flash) {
        // The profile runs standard attention: its layer without the s² values, with flash's
        // statistics (the model's bytes differ by exactly these).
        LayerRun standard = layer_run();
        standard.attention = Attention::Standard;
        const double b = double(p.micro_batch);
        measured.activation = std::max(
            0.0, measured.activation - layer_kept_bytes(m_, b, standard) + block_[k].activation);
        measured.working = block_[k].working;
      } else {
        measured.working = block_[k].working;
      }
      measured.working_input = block_[k].working_input;  // the profile measures no working set
      measured.working_weight = block_[k].working_weight;
      slowdown = measured.loaded;
      block_[k] = measured;
      profiled_[k] = true;
    }
    if (p.recompute == Recompute::Full && k == kLayer) {  // the forward runs again
      block_[k].i += block_[k].f;
      block_[k].i_comm += block_[k].f_comm;
    }
    block_[k].loaded = (block_[k].f + block_[k].i + block_[k].w) * slowdown;
  }
  for (int s = 0; s < S; ++s) {
    Cost sum;
    const int end = s + 1 < S ? cut_[s + 1] : blocks;
    for (int b = cut_[s]; b < end; ++b) sum.add(block_[block_kind(b, blocks)]);
    sum.action = block_[kLayer].action;  // once per action, whatever blocks it runs
    // The head's backward is done, and its kept values gone, when the last layer's starts.
    if (end == blocks && end - cut_[s] > 1) {
      sum.working =
          std::max(block_[kHead].working, block_[kLayer].working - block_[kHead].activation);
      // In a split backward's I the head leaves W's inputs behind (its input, the logits'
      // gradient).
      sum.working_input =
          std::max(block_[kHead].working_input,
                   block_[kLayer].working_input - block_[kHead].activation +
                       std::min(block_[kHead].weight_inputs, block_[kHead].activation));
    }
    // A split backward's I captures the recomputed layers' weight gradients (it runs them
    // whole) and adds them to the parameters' once it is done (SplitBackward::input_grad):
    // the lowest layer's backward runs beside those of the layers above, and beside the
    // gradient the stage received for its output (not the last stage), which the executor
    // holds until I returns; the top layer's working set counts that one as its own.
    if (p.recompute == Recompute::Full && !p.megatron && layers_on(s) > 1) {
      sum.working_input += (layers_on(s) - 1) * layer_params_per_rank(m, p.tp) * prec_.grad;
      if (s + 1 < S) sum.working_input += residual_part_bytes();
    }
    // loom's runtime keeps a stage's output until its backward (parallel/stage.cpp); the
    // analytic layers count their inputs, not their outputs: they add it. A profiled block's
    // bytes include its output (the profile allocates its input outside); Megatron-LM frees
    // the output once sent.
    if (!p.megatron && !measured_bytes_[kLayer] && s + 1 < S)
      sum.activation += residual_part_bytes();
    stage_.push_back(sum);
  }
}

int TransformerCostModel::layers_on(int s) const {
  const int blocks = int(m_.layers) + 2, S = int(cut_.size());
  const int end = s + 1 < S ? cut_.at(s + 1) : blocks;
  return std::max(0, std::min(end, blocks - 1) - std::max(cut_.at(s), 1));
}

double TransformerCostModel::gemm_s(double m, double n, double k, double batch) const {
  const double flops = 2 * batch * m * n * k;
  return flops / (peak_ * c_.gemm_fraction(std::cbrt(batch * m * n * k)));
}

double TransformerCostModel::selective_extra_s() const {
  if (p_.recompute != Recompute::Selective || p_.attention != Attention::Standard) return 0;
  const double b = double(p_.micro_batch);
  return attention(b).forward + elementwise_s(2 * attention_square_bytes(m_, b, layer_run()));
}

LayerRun TransformerCostModel::layer_run() const {
  LayerRun r{p_.tp,          p_.sequence_parallel, p_.recompute, p_.attention, prec_.activation,
             prec_.residual, !p_.megatron};
  r.megatron_core = p_.megatron;
  return r;
}

TransformerCostModel::Attn TransformerCostModel::attention(double b) const {
  const double s = double(m_.seq_len), h = double(m_.hidden), a = double(m_.heads), t = p_.tp;
  Attn out;
  if (p_.attention == Attention::Standard) {  // q kᵀ and the probabilities times v
    out.forward = 2 * gemm_s(s, s, h / a, b * a / t);
    out.backward = 2 * out.forward;
    return out;
  }
  // Flash (causal): the kernel skips the blocks above the diagonal, half of the 4·b·s²·h
  // FLOPs; its backward runs 5 products where the forward runs 2 (it recomputes the scores).
  const double flops = 0.5 * 4 * b * s * s * h / t;
  const double fallback = c_.gemm_fraction(std::cbrt(b * a / t * s * s * h / a));
  const AttentionKernel* k = c_.attention_kernel(h / a, s);
  out.forward = flops / (peak_ * (k && k->forward > 0 ? k->forward : fallback));
  out.backward = 2.5 * flops / (peak_ * (k && k->backward > 0 ? k->backward : fallback));
  return out;
}

double TransformerCostModel::regather_s(int inputs, double beside_s) const {
  if (!p_.sequence_parallel || p_.tp <= 1) return 0;
  const double bytes =
      double(p_.micro_batch) * double(m_.seq_len) * double(m_.hidden) * prec_.activation;
  const double gather =
      inputs * net_.collective_s(Collective::AllGather, bytes, p_.mesh().tp_group(0, 0));
  return c_.shared ? gather : std::max(0.0, gather - beside_s);
}

double TransformerCostModel::elementwise_s(double bytes) const {
  return bytes / (c_.memory_bandwidth * c_.elementwise_efficiency * c_.elementwise_in_training);
}

TransformerCostModel::Cost TransformerCostModel::analytic(int kind) const {
  const double b = double(p_.micro_batch), s = double(m_.seq_len), h = double(m_.hidden),
               V = double(m_.vocab), t = p_.tp, e = prec_.activation;
  const double M = b * s;
  const std::vector<int> tp_group = p_.mesh().tp_group(0, 0);
  // The forward's collectives move the products' bf16 outputs; the backward's move gradients
  // of residual-stream values (fp32 under loom's autocast), as does the embedding's forward.
  const double tp_ar = net_.collective_s(Collective::AllReduce, M * h * e, tp_group);
  const double tp_ar_residual =
      net_.collective_s(Collective::AllReduce, M * h * prec_.residual, tp_group);
  Cost c;
  if (kind == kLayer) {
    const double kv = kv_width(m_), f = ffn_width(m_);
    const double gated = m_.arch == Arch::Llama ? 2 : 1;  // SwiGLU: gate and up
    const double linear = gemm_s(M, (h + 2 * kv) / t, h) + gemm_s(M, h, h / t) +
                          gated * gemm_s(M, f / t, h) + gemm_s(M, h, f / t);
    const Attn core = attention(b);
    const LayerRun run = layer_run();
    LayerRun kept_all = run;
    kept_all.recompute = Recompute::None;
    const double square = attention_square_bytes(m_, b, run);
    const double elem_linear = elementwise_s(2 * (layer_kept_bytes(m_, b, kept_all) - square));
    const double elem_square = elementwise_s(2 * square);  // softmax, mask, dropout
    // Two collectives of b·s·h values each way; --tp-comm-overlap hides part of each under
    // the GEMMs of the same pass (the backward's input-gradient GEMMs take as long as the
    // forward's).
    const double comm_f = 2 * tp_ar, comm_b = 2 * tp_ar_residual;
    auto hidden = [&](double comm) {
      return p_.tp_comm_overlap ? std::min(c_.tp_overlap * comm, linear) : 0.0;
    };
    c.f_comm = comm_f - hidden(comm_f);
    c.i_comm = comm_b - hidden(comm_b);
    c.i_comm += regather_s(2, gemm_s(M, h, (h + 2 * kv) / t) + gated * gemm_s(M, h, f / t));
    c.f = linear + core.forward + elem_linear + elem_square + c.f_comm;
    c.i = linear + core.backward + kBackwardElementwise * (elem_linear + elem_square) + c.i_comm;
    c.w = linear;
    // Selective recomputation runs the attention core's forward again in the backward
    // (flash's backward recomputes its scores itself: nothing to add). Full recomputation
    // adds the whole forward (constructor).
    c.i += selective_extra_s();
    c.params = layer_params_per_rank(m_, p_.tp);
    c.activation = layer_kept_bytes(m_, b, run);
    c.working = layer_working_bytes(m_, b, run);
    LayerRun split = run;
    split.split_input = run.recompute != Recompute::Full;  // a recomputed layer's I is whole
    c.working_input = layer_working_bytes(m_, b, split);
    // W: the largest weight gradient (the MLP's, [h, f/t]) made new, and under sequence
    // parallelism the product's whole input gathered again.
    if (split.split_input)
      c.working_weight = (run.weight_grad_temp ? new_weight_grad_bytes(h * f / t, e) : 0) +
                         (p_.sequence_parallel && t > 1 ? M * h * e : 0);
    // W's inputs per token: qkv's, proj's, fc's and out's inputs (h, h/t, h, f/t) and output
    // gradients ((h + 2kv)/t, h, gated·f/t, h). A recomputed layer gives its weight gradients
    // in I.
    const double product_inputs = p_.sequence_parallel ? 2 * h / t : 2 * h;  // qkv's and fc's
    c.weight_inputs =
        run.recompute == Recompute::Full
            ? 0
            : M * e * (product_inputs + 2 * h + (2 * h + 2 * kv + (1 + gated) * f) / t);
  } else if (kind == kHead) {
    const double logits = 4 * M * V / t;  // fp32 logits for the softmax / loss
    const double gemm = gemm_s(M, V / t, h);
    const double elem = elementwise_s(3 * logits + 2 * M * h * e);
    c.i_comm = tp_ar_residual + regather_s(1, gemm);
    c.f = gemm + elem;
    c.i = gemm + 2 * elem + c.i_comm;
    c.w = gemm;
    c.params = head_params_per_rank(m_, p_.tp);
    // The final norm: the GPT's LayerNorm keeps its input (residual precision) and its output
    // (the product's input); the Llama's RMSNorm its input and normalized values (residual
    // precision) and the weighted ones; with sequence parallelism this rank's part of each.
    // The vocabulary-parallel loss keeps two fp32 [M, V/t] values, exp's output and the
    // shifted logits (gather's backward reads them); the unsplit loss one, its input.
    // (Measured against the runtime: planner-validation.md.)
    const double r = prec_.residual;
    const double norm = (m_.arch == Arch::Gpt ? r + e : 2 * r + e) / (p_.sequence_parallel ? t : 1);
    c.activation = (t > 1 ? 2 : 1) * logits + norm * M * h;
    // The loss's backward makes one fp32 [M, V] gradient beside the kept logits (loom's
    // cross entropy, model/model.cpp; libtorch's held two beside log-softmax's output:
    // planner-validation.md); Megatron's fused vocabulary-parallel loss writes it in place.
    c.working = logits;
    c.working_input = c.working;
    // loom's vocabulary-parallel head: once the loss's backward is done (its two kept values
    // freed, the logits' gradient left), the product's backward holds its input gradient and
    // its new weight gradient; with sequence parallelism also the input gathered again (and
    // a contiguous copy of it; in bf16 their casts) and the gradient's reduce-scattered part
    // (the memory report: planner-validation.md).
    if (t > 1 && !p_.megatron) {
      const double dx =
          p_.sequence_parallel ? M * h * (2 * r + e + (e != r ? e : 0) + e / t) : M * h * e;
      const double dw = new_weight_grad_bytes(V / t * h, e);
      c.working = std::max(c.working, dx + dw - logits);
      c.working_input = std::max(c.working_input, dx - logits);  // W makes the weight gradient
    }
    // Its input (this rank's part with sequence parallelism) and the logits' gradient.
    c.weight_inputs = M * h * e / (p_.sequence_parallel ? t : 1) + M * V / t * e;
  } else {
    const double elem = elementwise_s(3 * M * h * e);
    c.f_comm = tp_ar_residual;
    c.f = elem + c.f_comm;
    c.i = 2 * elem;  // no matrix product: the whole backward is in I
    c.params = embedding_params_per_rank(m_, p_.tp);
    c.activation = has_dropout(m_) ? M * h : 0;  // dropout mask
  }
  return c;
}

bool TransformerCostModel::profiled(int kind, Cost* out, int64_t tp) const {
  const bool llama = m_.arch == Arch::Llama;
  std::vector<const BlockProfile*> match;
  for (const BlockProfile& bp : c_.blocks) {
    if (bp.kind != kBlockNames[kind] || bp.width != m_.hidden || bp.seq_len != m_.seq_len) continue;
    if (bp.model != (llama ? "llama" : "gpt")) continue;
    if (llama &&
        (bp.kv_heads != kv_heads_of(m_) || bp.ffn_width != int64_t(ffn_width(m_)) || m_.tied))
      continue;
    if (bp.tp != tp) continue;
    if (kind == kLayer && bp.heads != m_.heads) continue;
    if (kind != kLayer && bp.vocab != m_.vocab) continue;
    match.push_back(&bp);
  }
  if (match.empty()) return false;
  std::sort(match.begin(), match.end(),
            [](auto* x, auto* y) { return x->micro_batch < y->micro_batch; });
  const double b = double(p_.micro_batch);
  // Linear between the two nearest measured sizes; outside the measured range, times grow in
  // proportion and ratios stay at the nearest size.
  auto time_at = [&](double BlockProfile::*field, bool ratio = false) {
    const BlockProfile* lo = match.front();
    const BlockProfile* hi = match.back();
    if (b <= lo->micro_batch) return lo->*field * (ratio ? 1.0 : b / lo->micro_batch);
    if (b >= hi->micro_batch) return hi->*field * (ratio ? 1.0 : b / hi->micro_batch);
    for (size_t i = 1; i < match.size(); ++i)
      if (match[i]->micro_batch >= b) {
        lo = match[i - 1];
        hi = match[i];
        break;
      }
    const double x = (b - lo->micro_batch) / double(hi->micro_batch - lo->micro_batch);
    return lo->*field + x * (hi->*field - lo->*field);
  };
  const double f = time_at(&BlockProfile::forward_s), bw = time_at(&BlockProfile::backward_s);
  const bool has_act =
      std::all_of(match.begin(), match.end(), [](auto* m) { return m->activation_bytes > 0; });
  out->activation = has_act ? time_at(&BlockProfile::activation_bytes) : -1;
  out->f = f;
  const bool split = std::all_of(match.begin(), match.end(),
                                 [](auto* m) { return m->input_s > 0 && m->weight_s > 0; });
  // The embedding has no matrix product: its whole backward is in I (model/linear_uses.h).
  out->i = kind == kEmbedding ? bw : split ? time_at(&BlockProfile::input_s) : bw / 2;
  out->w = kind == kEmbedding ? 0 : split ? time_at(&BlockProfile::weight_s) : bw / 2;
  out->split_extra = out->i + out->w - bw;  // B stays the measured fused backward
  out->loaded = time_at(&BlockProfile::loaded_slowdown, /*ratio=*/true);  // the caller scales it
  out->action = time_at(&BlockProfile::action_s);
  return true;
}

std::string TransformerCostModel::compute_source() const {
  std::string prof, ana;
  for (int k = 0; k < 3; ++k) {
    std::string& dst = profiled_[k] ? prof : ana;
    dst += (dst.empty() ? "" : ", ") + std::string(kBlockNames[k]);
  }
  if (prof.empty()) return "analytic";
  const bool shards =
      std::any_of(std::begin(profiled_at_tp_), std::end(profiled_at_tp_), [](bool b) { return b; });
  const bool scaled_too = [&] {
    for (int k = 0; k < 3; ++k)
      if (profiled_[k] && !profiled_at_tp_[k]) return true;
    return false;
  }();
  std::string scaled;
  if (p_.tp > 1 && shards)
    scaled = " as tp " + std::to_string(p_.tp) + " shards" +
             (scaled_too ? std::string(" (some at tp 1, scaled by the analytic model)") : "");
  else if (p_.tp > 1)
    scaled = " at tp 1, scaled to tp " + std::to_string(p_.tp) + " by the analytic model";
  if (ana.empty()) return "profiled" + scaled;
  return "profiled (" + prof + ")" + scaled + ", analytic (" + ana + ")";
}

double TransformerCostModel::compute_s(int stage, Kind kind) const {
  const Cost& c = stage_.at(stage);
  switch (kind) {
    case Kind::F: return c.f + c.action;
    case Kind::B: return c.i + c.w - c.split_extra + c.action;
    case Kind::I: return c.i + c.action;
    case Kind::W: return c.w + c.action;
    default: return 0;
  }
}

double TransformerCostModel::compute_comm_s(int stage, Kind kind) const {
  const Cost& c = stage_.at(stage);
  if (kind == Kind::F) return c.f_comm;
  if (kind == Kind::B) return c.i_comm;
  if (kind == Kind::I) return stage == 0 ? 0 : c.i_comm;  // the first stage's I is empty,
  if (kind == Kind::W) return stage == 0 ? c.i_comm : 0;  // its W the whole backward
  return 0;
}

// The residual stream, as each tensor-parallel rank sends it: its part of the sequence under
// sequence parallelism; without, the whole tensor from every rank in loom's runtime, a 1/t
// slice in Megatron-LM (scatter/gather), which the receivers all-gather before using it.
double TransformerCostModel::boundary_bytes(int) const {
  return residual_part_bytes() / (p_.megatron && !p_.sequence_parallel ? p_.tp : 1);
}

double TransformerCostModel::residual_part_bytes() const {
  return double(p_.micro_batch) * double(m_.seq_len) * double(m_.hidden) * prec_.residual /
         (p_.sequence_parallel ? p_.tp : 1);
}

double TransformerCostModel::receive_s(int stage) const {
  if (!p_.megatron || p_.sequence_parallel || p_.tp <= 1) return 0;
  return net_.collective_s(Collective::AllGather, p_.tp * boundary_bytes(stage),
                           p_.mesh().tp_group(0, 0));
}

double TransformerCostModel::grad_bytes(int stage) const {
  const double P = stage_.at(stage).params;
  // quant's message is a fraction of the fp32 gradient, whatever the training precision.
  return p_.light.reduce == 1 ? P * prec_.grad : P * 4 * p_.light.reduce;
}

double TransformerCostModel::tied_grad_bytes() const {
  return tied_copy_ ? double(m_.vocab) * m_.hidden / p_.tp * prec_.grad : 0;
}

double TransformerCostModel::tied_copy_bytes() const {
  return tied_copy_loom_ ? double(m_.vocab) * m_.hidden / p_.tp * 4 : 0;
}

double TransformerCostModel::sync_bytes(int stage) const {
  return p_.dp > 1 ? stage_.at(stage).params * 4 * p_.light.sync : 0;
}

double TransformerCostModel::param_bytes(int stage) const {
  return stage_.at(stage).params * prec_.param;
}

StageMemory TransformerCostModel::memory(int stage) const {
  const Cost& c = stage_.at(stage);
  const double P = c.params, d = p_.dp;
  StageMemory mem;
  mem.params = P * prec_.param;
  mem.grads = P * prec_.grad;
  mem.optimizer = P * prec_.optimizer;
  mem.activation = c.activation;
  mem.working = c.working;
  mem.working_input = c.working_input;
  mem.working_weight = c.working_weight;
  // A measured block's bytes are what its forward allocates: a received input is not among
  // them (an analytic layer counts its input).
  const int first = block_kind(cut_.at(stage), int(m_.layers) + 2);
  if (stage > 0 && measured_bytes_[first] && !p_.megatron)
    mem.received_input = boundary_bytes(stage - 1);
  mem.weight_inputs = std::min(c.weight_inputs, c.activation);
  if (!p_.megatron && layers_on(stage) > 0) mem.buffers = layer_buffer_bytes(m_, p_.attention);
  if (p_.dp > 1) {
    switch (p_.dp_mode) {
      case DpMode::AllReduce:  // full state on every replica
        break;
      case DpMode::Zero3:
        mem.gathered = mem.params;
        mem.params /= d;
        [[fallthrough]];
      case DpMode::Zero2:
        mem.grad_buffer = mem.grads;
        mem.grads /= d;
        [[fallthrough]];
      case DpMode::Zero1:
        mem.optimizer /= d;
        if (prec_.sharded_master && p_.dp_mode != DpMode::Zero3) mem.params += mem.params / d;
        break;
      case DpMode::Slim:
      case DpMode::Quant:
      case DpMode::Diloco:
      case DpMode::StreamingDiloco:  // the mode's own state beside the replica's full one
        mem.optimizer += P * p_.light.state_bytes;
        break;
      case DpMode::PowerSgd: check_simulated(p_.dp_mode, true);
    }
  }
  const bool sharded = p_.dp > 1 && (p_.dp_mode == DpMode::Zero1 || p_.dp_mode == DpMode::Zero2 ||
                                     p_.dp_mode == DpMode::Zero3);
  mem.saved = (sharded ? P / d : P) * prec_.param + mem.optimizer;
  // loom's tied head: the last stage's copy and its gradient, whole on every replica.
  if (stage + 1 == int(stage_.size())) {
    mem.params += tied_copy_bytes();
    mem.grads += tied_copy_bytes();
  }
  return mem;
}

double TransformerCostModel::loaded_slowdown(int stage) const {
  const Cost& c = stage_.at(stage);
  const double alone = c.f + c.i + c.w;
  return alone > 0 && c.loaded > 0 ? c.loaded / alone : 1.0;
}

Collective TransformerCostModel::reduce_collective(DpMode m) const {
  // ZeRO reduce-scatters (zero1 all-reduces under fp32, as loom's CPU runtime does); quant's
  // exchange moves an all-reduce's bytes (quantized_mean.h).
  if (config::zero_level(m) > 0 && !(m == DpMode::Zero1 && prec_.zero1_all_reduce))
    return Collective::ReduceScatter;
  return Collective::AllReduce;
}

double TransformerCostModel::optimizer_s(int stage) const {
  double P = stage_.at(stage).params;
  if (p_.dp > 1 && config::zero_level(p_.dp_mode) > 0) P /= p_.dp;
  // The light modes' encoding and merging, element-wise like the update itself.
  const double codec = p_.dp > 1 ? elementwise_s(p_.light.codec_bytes * P) : 0;
  // Megatron's mixed precision wraps AdamW in passes of its own (the cluster's measured step is
  // loom's AdamW over fp32 values only).
  const double around = elementwise_s(megatron_optimizer_extra_bytes() * P) + codec;
  if (c_.optimizer_s_per_param > 0) return P * c_.optimizer_s_per_param + around;
  // AdamW over fp32 values: reads the parameter, its gradient and both moments, writes three.
  return elementwise_s(28 * P) + around;
}

double TransformerCostModel::megatron_optimizer_extra_bytes() const {
  if (prec_.param >= 4) return 0;  // loom's own state is fp32: AdamW alone
  // Per parameter, as Megatron-LM's Float16 optimizer steps: the 2-byte gradients copied into
  // fp32 main gradients (none where they are fp32 already: the distributed optimizer's), the
  // gradients' norm for clipping (read once), under fp16 the loss scale's unscale-and-check
  // (read, write), and the fp32 main parameters copied into the 2-byte model ones. Clipping's
  // rescale runs only when the norm exceeds the limit and is not counted.
  const double to_main_grads = prec_.grad < 4 ? prec_.grad + 4 : 0;
  const double unscale = prec_.name == "fp16" ? 8 : 0;
  return to_main_grads + 4 + unscale + 4 + prec_.param;
}

double TransformerCostModel::step_flops() const {
  return iteration_flops(m_, double(p_.global_batch()), p_.recompute == Recompute::Full);
}

}  // namespace loom::plan
