// loom's Llama as LlamaForCausalLM (model/llama.cpp computes what it computes).
#include <cmath>
#include <map>

#include "loom/common/error.h"
#include "loom/interop/hf_family.h"
#include "loom/model/model.h"

namespace loom::interop::detail {
namespace {
using nlohmann::json;

constexpr double kNormEps = 1e-5;  // model/llama.cpp's RMSNorm epsilon

// A layer's loom names and Hugging Face's.
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> names = {
      {"norm1.weight", "input_layernorm.weight"},
      {"q.weight", "self_attn.q_proj.weight"},
      {"k.weight", "self_attn.k_proj.weight"},
      {"v.weight", "self_attn.v_proj.weight"},
      {"o.weight", "self_attn.o_proj.weight"},
      {"norm2.weight", "post_attention_layernorm.weight"},
      {"gate.weight", "mlp.gate_proj.weight"},
      {"up.weight", "mlp.up_proj.weight"},
      {"down.weight", "mlp.down_proj.weight"}};
  return names;
}

HfTensor tensor(const std::string& loom_name, const config::ModelConfig& c) {
  const auto [block, local] = split_name(loom_name);
  if (block == 0 && local == "tok.weight") return {"model.embed_tokens.weight"};
  if (block == c.layers + 1 && local == "norm.weight") return {"model.norm.weight"};
  if (block == c.layers + 1 && local == "head.weight") return {"lm_head.weight"};
  auto it = layer_names().find(local);
  LOOM_CHECK(block >= 1 && block <= c.layers && it != layer_names().end(),
             "no Hugging Face name for ", loom_name);
  return {"model.layers." + std::to_string(block - 1) + "." + it->second};
}

json to_config(const config::ModelConfig& c) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", c.vocab},
          {"hidden_size", c.width},
          {"intermediate_size", config::llama_ffn_width(c)},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"num_key_value_heads", c.kv_heads ? c.kv_heads : c.heads},
          {"head_dim", c.width / c.heads},
          {"max_position_embeddings", c.seq_len},
          {"rms_norm_eps", kNormEps},
          {"rope_theta", c.rope_theta},
          {"tie_word_embeddings", c.tie_embeddings},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"torch_dtype", "float32"}};
}

config::ModelConfig from_config(const json& cfg, const std::string& from, int64_t seq_len) {
  config::ModelConfig c;
  c.kind = config::ModelKind::Llama;
  c.vocab = need<int64_t>(cfg, from, "vocab_size");
  c.width = need<int64_t>(cfg, from, "hidden_size");
  c.layers = need<int64_t>(cfg, from, "num_hidden_layers");
  c.heads = need<int64_t>(cfg, from, "num_attention_heads");
  c.kv_heads = value_or(cfg, from, "num_key_value_heads", c.heads);
  c.ffn_width = need<int64_t>(cfg, from, "intermediate_size");
  c.rope_theta = value_or(cfg, from, "rope_theta", 10000.0);
  c.tie_embeddings = value_or(cfg, from, "tie_word_embeddings", false);
  c.seq_len =
      context_length(seq_len, value_or<int64_t>(cfg, from, "max_position_embeddings", 2048));
  if (c.heads < 1)
    LOOM_USAGE("'", from, "' has num_attention_heads ", c.heads, "; it must be >= 1");
  const int64_t head_dim = value_or(cfg, from, "head_dim", c.width / c.heads);
  if (head_dim != c.width / c.heads)
    LOOM_USAGE("'", from, "' has head_dim ", head_dim, " != hidden_size / heads; ",
               "loom's Llama needs head_dim = hidden_size / num_attention_heads");
  const double eps = value_or(cfg, from, "rms_norm_eps", kNormEps);
  if (std::abs(eps - kNormEps) > 1e-12)
    LOOM_USAGE("'", from, "' has rms_norm_eps ", eps, "; loom's Llama uses ", kNormEps);
  if (cfg.contains("rope_scaling") && !cfg.at("rope_scaling").is_null())
    LOOM_USAGE("'", from, "' scales its rotary embedding (rope_scaling); loom's Llama does not");
  if (value_or(cfg, from, "attention_bias", false) || value_or(cfg, from, "mlp_bias", false))
    LOOM_USAGE("'", from, "' has biases (attention_bias or mlp_bias); loom's Llama has none");
  return c;
}

}  // namespace

const Family& llama_family() {
  static const Family f{
      config::ModelKind::Llama, "llama", "LlamaForCausalLM", to_config, from_config, tensor};
  return f;
}

}  // namespace loom::interop::detail
