#pragma once
// Closed forms for a GPT (pre-LayerNorm blocks, MLP 4h, untied head) or a Llama (RMSNorm,
// q/k/v/o with kv key/value heads of width h/a, SwiGLU with f units, no biases, rotary
// positions) with l layers, width h, a heads, sequence s, vocabulary V; b samples per
// micro-batch, t tensor-parallel ranks.
//  - FLOPs (Narayanan et al. 2021; a multiply-add = 2): forward of one layer
//    24·b·s·h² + 4·b·s²·h, of the head 2·b·s·h·V. Per iteration of B samples, backward = 2x
//    forward: 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) without recomputation; with full
//    recomputation every layer runs its forward twice: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))
//    (the head is not recomputed; both forms count its 6·B·s·h·V).
//  - Activations kept per layer and micro-batch (Korthikanti et al. 2022, 16-bit values,
//    1-byte dropout masks): s·b·h·(34 + 5·a·s/h) without tensor parallelism;
//    s·b·h·(10 + 24/t + 5·a·s/(h·t)) with it; s·b·h/t·(34 + 5·a·s/h) with sequence
//    parallelism; 2·s·b·h (/t with sequence parallelism) with full recomputation. Without
//    dropout (loom's GPT) the masks go: 32 + 2·a·s/h, and 8 + 24/t for the unsplit part.
//    Other element sizes scale the formula by bytes/2.
//    Selective recomputation (Korthikanti et al. 2022, Table 2) keeps everything but the
//    attention core's a·s² terms: s·b·h·34 (/t as above); its backward recomputes the core,
//    whose s² values (5·a·s²·b bytes, 2 without dropout) live only inside that backward.
//    Flash attention (Dao et al. 2022) never stores the s² values either: it keeps Q, K, V
//    and the output (already in the 34) plus the softmax statistics, one fp32 value per
//    head and token (4·a·s·b/t bytes), and recomputes the scores in its own backward.
//  - Llama: the products' FLOPs are 2·b·s times the layer's matrix parameters (d_kv = kv·h/a):
//    h·(2h + 2·d_kv) + 3·h·f. Its activations are what loom's runtime keeps (model/llama.cpp;
//    measured, docs/notes/planner-validation.md), in values per token: each RMSNorm its
//    input, normalized and weighted outputs (3h, unsplit under tp), q/k/v (h + 2·d_kv), the
//    attention output (h), SwiGLU's gate, silu, up and product (4f); the standard core keeps
//    a·s probabilities (no dropout), and key/value heads repeated for the query heads
//    (2·(h − d_kv)) while the core is kept.
#include <cstdint>
#include <string>

#include "loom/plan/parallel.h"

namespace loom::plan {

enum class Arch { Gpt, Llama };

struct Transformer {
  int64_t layers = 1, hidden = 1, heads = 1, seq_len = 1, vocab = 51200;
  bool dropout = true;  // Megatron's GPT has dropout; loom's GPT has none (a Llama: ignored)
  Arch arch = Arch::Gpt;
  int64_t kv_heads = 0;  // llama: key/value heads; 0 = heads
  int64_t ffn = 0;       // llama: SwiGLU units; 0 = a multiple of 64 >= 8h/3
  bool tied = false;     // the head is the token embedding (one stage holds both, or
                         // Megatron-LM's copy on the last stage: TransformerCostModel)
};

// A gpt or llama model of a `loom train` configuration (UsageError for the other kinds).
Transformer transformer_of(const config::ModelConfig& c);
bool has_dropout(const Transformer& m);     // a GPT with dropout
int64_t kv_heads_of(const Transformer& m);  // a Llama's key/value heads (kv_heads or heads)
double kv_width(const Transformer& m);      // h for a GPT, kv·h/a for a Llama
double ffn_width(const Transformer& m);     // 4h for a GPT
// The matrices' parameters of one layer (what its products multiply by).
double layer_matrix_params(const Transformer& m);

// Whether tensor parallelism of degree tp splits the model: heads and width (a Llama also its
// key/value heads, SwiGLU width and vocabulary).
bool splits_over(const Transformer& m, int tp);

double layer_params(const Transformer& m);      // GPT 12h² + 13h; Llama matrices + 2h
double embedding_params(const Transformer& m);  // V·h, + s·h positions for a GPT
double head_params(const Transformer& m);       // final norm (2h GPT, h Llama) + V·h untied
double total_params(const Transformer& m);
// What one of `tp` tensor-parallel ranks holds of a layer, the embedding or the head: the
// split matrices' (and their biases') 1/tp share and every replicated parameter whole (the
// norms, the row-parallel products' biases, a GPT's positions), as loom and Megatron-LM keep
// them.
double layer_params_per_rank(const Transformer& m, int tp);
double embedding_params_per_rank(const Transformer& m, int tp);
double head_params_per_rank(const Transformer& m, int tp);

double layer_forward_flops(const Transformer& m, double b);
double head_forward_flops(const Transformer& m, double b);
// Narayanan's count: full recomputation adds the layers' forward (the 96 form); selective
// recomputation and flash's own recomputation are not counted (Megatron-LM does not).
double iteration_flops(const Transformer& m, double global_batch, bool recompute);

// How one layer runs: what its activation bytes depend on.
struct LayerRun {
  int tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::None;
  Attention attention = Attention::Standard;
  double elem_bytes = 2;
  // The residual stream's values that the norms keep (their inputs; the Llama's RMSNorm also
  // its normalized values) and a recomputed layer's input: fp32 under loom's autocast (4),
  // the activations' type in Megatron-LM (0 = elem_bytes).
  double residual_bytes = 0;
  double residual() const { return residual_bytes > 0 ? residual_bytes : elem_bytes; }
  // The backward makes each weight gradient as a new tensor (in the activations' type, then
  // widened to fp32) before adding it to the parameter's: loom's runtime. Megatron-LM
  // accumulates into its fp32 buffer inside the product (gradient accumulation fusion).
  bool weight_grad_temp = true;
  // The input-gradient half (I) of a split backward (zero-bubble schedules): no weight
  // gradient is made, and the gradients of the products' outputs stay (W's inputs).
  bool split_input = false;
  // Megatron-LM's attention core: its fused softmax's backward works in place on the
  // probabilities' gradient, and it reads q, k and v as views of the projection (loom's
  // copies them into heads).
  bool megatron_core = false;
};
// Bytes one layer keeps from its forward to its backward for a micro-batch of b samples.
double layer_kept_bytes(const Transformer& m, double b, const LayerRun& r);
// Bytes that exist only inside the layer's backward, at the larger of its two peaks: the
// gradients of its first steps (the residual stream's coming in, the MLP's hidden values' and
// the last product's weight gradient), or the attention core's backward (the s² gradients);
// and the recomputed activations (the whole layer's under full recomputation, the attention
// core's s² values under selective).
double layer_working_bytes(const Transformer& m, double b, const LayerRun& r);
double layer_backward_gradient_bytes(const Transformer& m, double b, const LayerRun& r);
// The s² temporaries of the standard attention core's backward, per micro-batch of b: the
// probabilities' gradient and loom's scores' gradient (Megatron-LM's fused softmax works in
// place); 0 with flash attention.
double attention_core_backward_bytes(const Transformer& m, double b, const LayerRun& r);
// What the layer's backward holds beyond its kept activations while in the attention core:
// the residual stream's gradient, the value heads' gradient and the core's s² temporaries,
// less the MLP's kept values already freed (a split backward's I keeps W's inputs and the
// products' output gradients). Negative when the MLP freed more.
double attention_phase_bytes(const Transformer& m, double b, const LayerRun& r);
// The s² part of a layer's activations (scores, probabilities, dropout mask): 5·a·s²·b
// bytes at 2-byte values (2·a·s²·b without dropout), split over t; 0 with flash attention.
double attention_square_bytes(const Transformer& m, double b, const LayerRun& r);
// A weight gradient of `values` values as loom's runtime makes it: a new tensor in the
// activations' type, widened to fp32 (a second one) when that type is narrower.
double new_weight_grad_bytes(double values, double elem_bytes);
// The tables loom's layers share, one copy a rank: standard attention's causal mask (fp32,
// s²) and a Llama's rotary angles (cos and sin, fp32, s × the head width).
double layer_buffer_bytes(const Transformer& m, Attention attention);
// Shorthand for standard attention: `recompute` = full recomputation.
double layer_activation_bytes(const Transformer& m, double b, int tp, bool sequence_parallel,
                              bool recompute, double elem_bytes = 2);

// Parameter, gradient and optimizer-state bytes per parameter on one rank for a data-parallel
// mode with mixed precision (2 + 2 + 12 = 16 bytes per parameter unsharded).
struct StateBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};
StateBytes state_bytes_per_param(DpMode dp_mode, int dp);

}  // namespace loom::plan
