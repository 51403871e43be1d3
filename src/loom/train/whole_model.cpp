#include "loom/train/whole_model.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "loom/common/error.h"
#include "loom/model/tensor_parallel.h"
#include "loom/train/consolidate.h"

namespace loom::train {
namespace fs = std::filesystem;

namespace {

// The data.tokenizer of the run folder above a checkpoint folder (its config.toml), if any.
std::string run_tokenizer(const std::string& checkpoint) {
  fs::path p = fs::absolute(checkpoint);
  for (int up = 0; up < 3 && p.has_parent_path(); ++up, p = p.parent_path()) {
    const fs::path toml = p / "config.toml";
    if (!fs::exists(toml)) continue;
    try {
      return config::load_file(toml.string()).data.tokenizer;
    } catch (const UsageError&) {
      return "";
    }
  }
  return "";
}

// The whole value of parameter `name`: itself, replica 0's (slim), or its tensor-parallel
// parts joined.
torch::Tensor whole_value(const CheckpointContents& c, const std::string& name) {
  for (int replica : {-1, 0})
    if (auto it = c.tensors.find({"param/" + name, replica}); it != c.tensors.end())
      return it->second.data.view(it->second.shape);
  std::vector<torch::Tensor> parts;  // the manifest says how many the run cut it into
  for (int i = 0; i < c.manifest.tp; ++i) {
    auto it = c.tensors.find({detail::concat("param/", name, "#tp", i, "of", c.manifest.tp), -1});
    if (it == c.tensors.end()) break;
    parts.push_back(it->second.data.view(it->second.shape));
  }
  if (int(parts.size()) != c.manifest.tp)
    LOOM_USAGE("checkpoint '", c.dir, "' lacks parameter '", name,
               "'; it is incomplete or of another model");
  return model::tp_unshard(name, parts);
}

}  // namespace

std::map<std::string, torch::Tensor> named_parameters(const model::Model& m) {
  std::map<std::string, torch::Tensor> out;
  for (size_t b = 0; b < m.blocks.size(); ++b)
    for (const auto& p : m.blocks[b]->named_parameters())
      out[model::param_name(b, p.key())] = p.value();
  return out;
}

WholeModel load_whole_model(const std::string& path, torch::Device device) {
  // The parameters only: not the optimizer's state beside them (twice their size with AdamW).
  const CheckpointContents c = read_whole_checkpoint(
      path, [](const std::string& name) { return name.rfind("param/", 0) == 0; },
      FileCheck::kWhatIsRead);
  WholeModel w;
  w.config = c.manifest.model;
  w.step = c.manifest.step;
  w.tokenizer = run_tokenizer(path);
  w.model = model::build(w.config, /*seed=*/0);
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : named_parameters(w.model)) {
    const torch::Tensor v = whole_value(c, name);
    if (v.sizes() != p.sizes())
      LOOM_USAGE("checkpoint '", c.dir, "' holds '", name, "' of shape ", v.sizes(),
                 ", its model needs ", p.sizes(), "; the checkpoint is damaged");
    p.copy_(v);
  }
  for (auto& b : w.model.blocks) b->to(device);
  return w;
}

}  // namespace loom::train
