#include "loom/interop/hf_llama.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "loom/common/error.h"
#include "loom/interop/safetensors.h"
#include "loom/train/checkpoint.h"
#include "loom/train/consolidate.h"

namespace loom::interop {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

}  // namespace

std::string hf_name(const std::string& loom_name, int64_t layers) {
  std::smatch m;
  if (!std::regex_match(loom_name, m, std::regex(R"(blocks\.(\d+)\.(.+))")))
    LOOM_CHECK(false, "not a loom parameter name: ", loom_name);
  const int64_t block = std::stoll(m[1].str());
  const std::string local = m[2].str();
  if (block == 0 && local == "tok.weight") return "model.embed_tokens.weight";
  if (block == layers + 1 && local == "norm.weight") return "model.norm.weight";
  if (block == layers + 1 && local == "head.weight") return "lm_head.weight";
  auto it = layer_names().find(local);
  LOOM_CHECK(block >= 1 && block <= layers && it != layer_names().end(),
             "no Hugging Face name for ", loom_name);
  return "model.layers." + std::to_string(block - 1) + "." + it->second;
}

void export_llama(const train::WholeModel& w, const std::string& out,
                  const std::string& tokenizer) {
  const config::ModelConfig& c = w.config;
  if (c.kind != config::ModelKind::Llama)
    LOOM_USAGE(
        "loom export --format hf writes Llama models (LlamaForCausalLM); this checkpoint "
        "holds a ",
        c.kind,
        (c.kind == config::ModelKind::Gpt
             ? " (its head has a bias, which GPT2LMHeadModel lacks); train model.kind = llama"
             : "; train model.kind = llama"));
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    LOOM_USAGE("--out '", out, "' exists and is not an empty folder; choose another");
  fs::create_directories(out, ec);
  if (ec) LOOM_USAGE("cannot create '", out, "': ", ec.message());
  const int64_t kv = c.kv_heads ? c.kv_heads : c.heads;
  const json config = {{"architectures", {"LlamaForCausalLM"}},
                       {"model_type", "llama"},
                       {"vocab_size", c.vocab},
                       {"hidden_size", c.width},
                       {"intermediate_size", model::llama_ffn_width(c)},
                       {"num_hidden_layers", c.layers},
                       {"num_attention_heads", c.heads},
                       {"num_key_value_heads", kv},
                       {"head_dim", c.width / c.heads},
                       {"max_position_embeddings", c.seq_len},
                       {"rms_norm_eps", kNormEps},
                       {"rope_theta", c.rope_theta},
                       {"tie_word_embeddings", c.tie_embeddings},
                       {"hidden_act", "silu"},
                       {"attention_bias", false},
                       {"mlp_bias", false},
                       {"torch_dtype", "float32"}};
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [name, p] : train::named_parameters(w.model))
    tensors[hf_name(name, c.layers)] = p;
  write_safetensors((fs::path(out) / "model.safetensors").string(), tensors);
  train::write_file_atomic((fs::path(out) / "config.json").string(), config.dump(2) + "\n");
  if (!tokenizer.empty()) fs::copy_file(tokenizer, fs::path(out) / "tokenizer.model", ec);
  if (ec) LOOM_USAGE("cannot copy the tokenizer '", tokenizer, "' to '", out, "': ", ec.message());
}

config::ModelConfig import_llama(const std::string& from, const std::string& out, int64_t seq_len) {
  const fs::path dir(from);
  json cfg;
  try {
    cfg = json::parse(train::read_file((dir / "config.json").string()));
  } catch (const json::exception& e) {
    LOOM_USAGE("'", (dir / "config.json").string(), "' is not JSON (", e.what(), ")");
  }
  const std::string type = cfg.value("model_type", "");
  if (type != "llama")
    LOOM_USAGE("'", from, "' holds a '", type,
               "' model; loom imports Llama models (model_type "
               "llama)");
  auto need = [&](const char* key) {
    if (!cfg.contains(key)) LOOM_USAGE("'", from, "/config.json' lacks \"", key, "\"");
    return cfg.at(key);
  };
  config::ModelConfig c;
  c.kind = config::ModelKind::Llama;
  c.vocab = need("vocab_size").get<int64_t>();
  c.width = need("hidden_size").get<int64_t>();
  c.layers = need("num_hidden_layers").get<int64_t>();
  c.heads = need("num_attention_heads").get<int64_t>();
  c.kv_heads = cfg.value("num_key_value_heads", c.heads);
  c.ffn_width = need("intermediate_size").get<int64_t>();
  c.rope_theta = cfg.value("rope_theta", 10000.0);
  c.tie_embeddings = cfg.value("tie_word_embeddings", false);
  const int64_t positions = cfg.value("max_position_embeddings", int64_t(2048));
  c.seq_len = seq_len > 0 ? seq_len : std::min<int64_t>(positions, 4096);
  if (cfg.value("head_dim", c.width / c.heads) != c.width / c.heads)
    LOOM_USAGE("'", from, "' has head_dim ", cfg.value("head_dim", 0), " != hidden_size / heads; ",
               "loom's Llama needs head_dim = hidden_size / num_attention_heads");
  if (std::abs(cfg.value("rms_norm_eps", kNormEps) - kNormEps) > 1e-12)
    LOOM_USAGE("'", from, "' has rms_norm_eps ", cfg.value("rms_norm_eps", 0.0),
               "; loom's Llama uses ", kNormEps);
  if (cfg.contains("rope_scaling") && !cfg.at("rope_scaling").is_null())
    LOOM_USAGE("'", from, "' scales its rotary embedding (rope_scaling); loom's Llama does not");
  if (cfg.value("attention_bias", false) || cfg.value("mlp_bias", false))
    LOOM_USAGE("'", from, "' has biases (attention_bias or mlp_bias); loom's Llama has none");
  config::Config whole;
  whole.model = c;
  config::validate(whole);

  const auto weights = read_safetensors((dir / "model.safetensors").string());
  const model::Model shape = model::build(c, 0);
  train::CheckpointContents contents;
  contents.manifest.step = 0;
  contents.manifest.dp_mode = "allreduce";
  contents.manifest.schedule = "1f1b";
  contents.manifest.optimizer = "adamw";
  contents.manifest.loom_version = "import";
  contents.manifest.model = c;
  contents.manifest.blocks = static_cast<int>(shape.blocks.size());
  contents.manifest.first = {0};
  for (const auto& [name, p] : train::named_parameters(shape)) {
    const std::string hf = hf_name(name, c.layers);
    auto it = weights.find(hf);
    if (it == weights.end())
      LOOM_USAGE("'", from, "/model.safetensors' lacks '", hf, "' (loom's ", name, ")");
    if (it->second.sizes() != p.sizes())
      LOOM_USAGE("'", hf, "' has shape ", it->second.sizes(), ", the model of config.json needs ",
                 p.sizes());
    parallel::Chunk chunk{"param/" + name, -1, 0, p.sizes().vec(),
                          it->second.reshape({-1}).contiguous()};
    contents.tensors[{chunk.name, -1}] = chunk;
  }
  train::write_consolidated(contents, out);
  return c;
}

}  // namespace loom::interop
