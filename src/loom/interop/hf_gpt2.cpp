// loom's GPT as GPT2LMHeadModel: the same blocks (pre-LayerNorm, fused QKV laid out [q | k | v]
// by heads, exact GELU MLP of 4x width, learned positions). GPT-2's Conv1D layers keep their
// weights as [in, out], the transpose of a Linear's; its head has no bias, so a loom GPT
// trained with model.head_bias = true has no GPT-2 form.
#include <cmath>
#include <map>

#include "loom/common/error.h"
#include "loom/interop/hf_family.h"

namespace loom::interop::detail {
namespace {
using nlohmann::json;

constexpr double kNormEps = 1e-5;  // torch::nn::LayerNorm's default, model/gpt.cpp's

// A layer's loom names and GPT-2's (under transformer.h.<i>.), and whether GPT-2 transposes it.
struct LayerName {
  const char* hf;
  bool transposed;
};
const std::map<std::string, LayerName>& layer_names() {
  static const std::map<std::string, LayerName> names = {
      {"ln1.weight", {"ln_1.weight", false}},        {"ln1.bias", {"ln_1.bias", false}},
      {"qkv.weight", {"attn.c_attn.weight", true}},  {"qkv.bias", {"attn.c_attn.bias", false}},
      {"proj.weight", {"attn.c_proj.weight", true}}, {"proj.bias", {"attn.c_proj.bias", false}},
      {"ln2.weight", {"ln_2.weight", false}},        {"ln2.bias", {"ln_2.bias", false}},
      {"fc.weight", {"mlp.c_fc.weight", true}},      {"fc.bias", {"mlp.c_fc.bias", false}},
      {"out.weight", {"mlp.c_proj.weight", true}},   {"out.bias", {"mlp.c_proj.bias", false}}};
  return names;
}

HfTensor tensor(const std::string& loom_name, const config::ModelConfig& c) {
  const auto [block, local] = split_name(loom_name);
  if (block == 0 && local == "tok.weight") return {"transformer.wte.weight"};
  if (block == 0 && local == "pos.weight") return {"transformer.wpe.weight"};
  if (block == c.layers + 1 && local == "lnf.weight") return {"transformer.ln_f.weight"};
  if (block == c.layers + 1 && local == "lnf.bias") return {"transformer.ln_f.bias"};
  if (block == c.layers + 1 && local == "head.weight") return {"lm_head.weight"};
  auto it = layer_names().find(local);
  LOOM_CHECK(block >= 1 && block <= c.layers && it != layer_names().end(), "no GPT-2 name for ",
             loom_name);
  return {"transformer.h." + std::to_string(block - 1) + "." + it->second.hf,
          it->second.transposed};
}

json to_config(const config::ModelConfig& c) {
  if (c.head_bias)
    LOOM_USAGE("this GPT's head has a bias (model.head_bias = true), which GPT2LMHeadModel lacks; ",
               "only a GPT trained with model.head_bias = false (the default) exports");
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"vocab_size", c.vocab},
          {"n_positions", c.seq_len},
          {"n_embd", c.width},
          {"n_layer", c.layers},
          {"n_head", c.heads},
          {"n_inner", 4 * c.width},
          {"activation_function", "gelu"},  // exact (erf) GELU, as torch::gelu
          {"layer_norm_epsilon", kNormEps},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", c.tie_embeddings},
          {"bos_token_id", nullptr},
          {"eos_token_id", nullptr},
          {"torch_dtype", "float32"}};
}

config::ModelConfig from_config(const json& cfg, const std::string& from, int64_t seq_len) {
  config::ModelConfig c;
  c.kind = config::ModelKind::Gpt;
  c.head_bias = false;
  c.vocab = need<int64_t>(cfg, from, "vocab_size");
  c.width = need<int64_t>(cfg, from, "n_embd");
  c.layers = need<int64_t>(cfg, from, "n_layer");
  c.heads = need<int64_t>(cfg, from, "n_head");
  c.tie_embeddings = value_or(cfg, from, "tie_word_embeddings", true);
  const int64_t positions = need<int64_t>(cfg, from, "n_positions");
  c.seq_len = context_length(seq_len, positions);
  if (c.seq_len > positions)
    LOOM_USAGE("--seq-len ", c.seq_len, " exceeds the model's ", positions,
               " learned positions (n_positions); give --seq-len ", positions, " or less");
  const int64_t inner = value_or<int64_t>(cfg, from, "n_inner", 4 * c.width);
  if (inner != 4 * c.width)
    LOOM_USAGE("'", from, "' has n_inner ", inner, "; loom's GPT has an MLP of 4 x ",
               "n_embd = ", 4 * c.width);
  const std::string activation =
      value_or<std::string>(cfg, from, "activation_function", "gelu_new");
  if (activation != "gelu")
    LOOM_USAGE("'", from, "' uses activation_function '", activation,
               "'; loom's GPT uses the exact GELU ('gelu')");
  const double eps = value_or(cfg, from, "layer_norm_epsilon", kNormEps);
  if (std::abs(eps - kNormEps) > 1e-12)
    LOOM_USAGE("'", from, "' has layer_norm_epsilon ", eps, "; loom's GPT uses ", kNormEps);
  if (!value_or(cfg, from, "scale_attn_weights", true) ||
      value_or(cfg, from, "scale_attn_by_inverse_layer_idx", false))
    LOOM_USAGE("'", from, "' scales its attention otherwise than by 1/sqrt(head dim) ",
               "(scale_attn_weights, scale_attn_by_inverse_layer_idx); loom's GPT does not");
  if (value_or(cfg, from, "add_cross_attention", false))
    LOOM_USAGE("'", from, "' has cross-attention; loom's GPT is a decoder only");
  return c;
}

}  // namespace

const Family& gpt2_family() {
  static const Family f{
      config::ModelKind::Gpt, "gpt2", "GPT2LMHeadModel", to_config, from_config, tensor};
  return f;
}

}  // namespace loom::interop::detail
