#include "loom/interop/hf.h"

#include <filesystem>
#include <iomanip>
#include <regex>
#include <sstream>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/text.h"
#include "loom/interop/hf_family.h"
#include "loom/interop/safetensors.h"
#include "loom/plan/transformer.h"
#include "loom/train/checkpoint.h"
#include "loom/train/consolidate.h"

namespace loom::interop {
namespace fs = std::filesystem;
using nlohmann::json;

namespace detail {

std::pair<int64_t, std::string> split_name(const std::string& loom_name) {
  std::smatch m;
  LOOM_CHECK(std::regex_match(loom_name, m, std::regex(R"(blocks\.(\d+)\.(.+))")),
             "not a loom parameter name: ", loom_name);
  return {std::stoll(m[1].str()), m[2].str()};
}

void missing(const std::string& from, const char* key) {
  LOOM_USAGE("'", from, "/config.json' lacks \"", key, "\"");
}

void wrong_type(const std::string& from, const char* key, const json& value, const char* wanted) {
  std::string shown = value.dump();
  if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
  LOOM_USAGE("'", from, "/config.json' has \"", key, "\": ", shown, "; it must be ", wanted);
}

int64_t context_length(int64_t seq_len, int64_t positions) {
  return seq_len > 0 ? seq_len : std::min<int64_t>(positions, 4096);
}

}  // namespace detail

namespace {

// A parameter count for a message: exact while it fits, else in powers of ten.
std::string count_text(double n) {
  if (n < 1e15) return std::to_string(static_cast<int64_t>(n));
  std::ostringstream out;
  out << std::setprecision(3) << n;
  return out.str();
}

const detail::Family& family_of(config::ModelKind kind) {
  if (kind == config::ModelKind::Llama) return detail::llama_family();
  if (kind == config::ModelKind::Gpt) return detail::gpt2_family();
  LOOM_USAGE("loom export --format hf writes language models (gpt as GPT2LMHeadModel, llama as ",
             "LlamaForCausalLM); this checkpoint holds a ", kind);
}

const detail::Family& family_of(const std::string& model_type, const std::string& from) {
  for (const detail::Family* f : {&detail::llama_family(), &detail::gpt2_family()})
    if (model_type == f->model_type) return *f;
  LOOM_USAGE("'", from, "' holds a '", model_type,
             "' model; loom imports model_type llama (LlamaForCausalLM) and gpt2 "
             "(GPT2LMHeadModel)");
}

}  // namespace

std::string export_hf(const train::WholeModel& w, const std::string& out,
                      const std::string& tokenizer) {
  const detail::Family& family = family_of(w.config.kind);
  const json config = family.to_config(w.config);  // refuses before anything is written
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    LOOM_USAGE("--out '", out, "' exists and is not an empty folder; choose another");
  if (!tokenizer.empty() && !fs::is_regular_file(tokenizer, ec))
    LOOM_USAGE("the tokenizer '", tokenizer, "' is not a file; pass --tokenizer FILE");
  AtomicFolder folder(out, "choose another --out");
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& [name, p] : train::named_parameters(w.model)) {
    const detail::HfTensor h = family.tensor(name, w.config);
    tensors[h.name] = h.transposed ? p.t().contiguous() : p;
  }
  write_safetensors(folder.file("model.safetensors"), tensors);
  write_file_atomic(folder.file("config.json"), config.dump(2) + "\n");
  if (!tokenizer.empty()) write_file_atomic(folder.file("tokenizer.model"), read_file(tokenizer));
  folder.commit();
  return family.architecture;
}

namespace {

// The folder's weights: model.safetensors, or the shards model.safetensors.index.json names
// (transformers' save_pretrained splits a model above max_shard_size, 5 GB by default).
std::map<std::string, torch::Tensor> read_weights(const fs::path& dir, const std::string& from) {
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors", ec))
    return read_safetensors((dir / "model.safetensors").string());
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index, ec)) {
    if (fs::exists(dir / "pytorch_model.bin", ec) ||
        fs::exists(dir / "pytorch_model.bin.index.json", ec))
      LOOM_USAGE("'", from, "' holds its weights as pytorch_model.bin; loom reads safetensors: ",
                 "save the model with save_pretrained(folder, safe_serialization=True)");
    LOOM_USAGE("'", from, "' has no model.safetensors (nor model.safetensors.index.json)");
  }
  json map;
  try {
    map = json::parse(read_file(index.string())).at("weight_map");
  } catch (const json::exception& e) {
    LOOM_USAGE("'", index.string(), "' is not a safetensors index (", e.what(), ")");
  }
  if (!map.is_object() || map.empty())
    LOOM_USAGE("'", index.string(), "' has no weight_map of tensor names to files");
  std::map<std::string, std::vector<std::string>> by_file;
  for (const auto& [name, file] : map.items()) {
    const std::string shard = file.is_string() ? file.get<std::string>() : "";
    // A shard is a file of this folder: no path may lead elsewhere.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      LOOM_USAGE("'", index.string(), "' maps ", text::quote(name), " to ",
                 text::escape(file.dump()), ", not a file of the folder");
    by_file[shard].push_back(name);
  }
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [shard, names] : by_file) {
    auto tensors = read_safetensors((dir / shard).string());
    for (const std::string& name : names) {
      auto it = tensors.find(name);
      if (it == tensors.end())
        LOOM_USAGE("'", (dir / shard).string(), "' lacks ", text::quote(name),
                   ", which model.safetensors.index.json places there");
      weights[name] = std::move(it->second);
    }
  }
  return weights;
}

}  // namespace

config::ModelConfig import_hf(const std::string& from, const std::string& out, int64_t seq_len) {
  const fs::path dir(from);
  std::error_code ec;
  if (!fs::is_regular_file(dir / "config.json", ec))
    LOOM_USAGE("'", from, "' is not a Hugging Face model folder (it has no config.json); pass ",
               "--from the folder save_pretrained wrote");
  json cfg;
  try {
    cfg = json::parse(read_file((dir / "config.json").string()));
  } catch (const json::exception& e) {
    LOOM_USAGE("'", (dir / "config.json").string(), "' is not JSON (", e.what(), ")");
  }
  if (!cfg.is_object())
    LOOM_USAGE("'", (dir / "config.json").string(), "' is not a JSON object of model settings");
  const detail::Family& family =
      family_of(detail::value_or<std::string>(cfg, from, "model_type", ""), from);
  const config::ModelConfig c = family.from_config(cfg, from, seq_len);
  config::Config whole;
  whole.model = c;
  config::validate(whole);

  const auto weights = read_weights(dir, from);
  // The weights hold every parameter: a config.json that says more than they can hold is
  // refused before the model is built (a damaged one could ask for terabytes).
  const double params = plan::total_params(plan::transformer_of(c));
  int64_t held = 0;
  for (const auto& [name, t] : weights) held += t.numel();
  if (params > static_cast<double>(held))
    LOOM_USAGE("'", from, "/config.json' describes ", count_text(params),
               " parameters, its weights hold ", count_text(static_cast<double>(held)));
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
    const detail::HfTensor h = family.tensor(name, c);
    auto it = weights.find(h.name);
    // Checkpoints saved from the base model (GPT2Model) name tensors without "transformer.".
    if (it == weights.end() && h.name.starts_with("transformer."))
      it = weights.find(h.name.substr(std::string("transformer.").size()));
    if (it == weights.end())
      LOOM_USAGE("'", from, "' has no weight '", h.name, "' (loom's ", name, ")");
    const torch::Tensor t = h.transposed ? it->second.t() : it->second;
    if (t.sizes() != p.sizes())
      LOOM_USAGE("'", h.name, "' has shape ", it->second.sizes(),
                 ", the model of config.json needs ", h.transposed ? p.t().sizes() : p.sizes());
    parallel::Chunk chunk{"param/" + name, -1, 0, p.sizes().vec(), t.reshape({-1}).contiguous()};
    contents.tensors[{chunk.name, -1}] = chunk;
  }
  train::write_consolidated(contents, out);
  return c;
}

}  // namespace loom::interop
