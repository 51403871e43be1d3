#pragma once
// A checkpoint as one whole model in one process (tp = 1), whatever layout trained it: what
// `loom generate` samples from and `loom export` writes out. A tensor-parallel checkpoint's
// parts are joined (model::tp_unshard); a slim checkpoint gives replica 0's model.
#include <map>
#include <string>

#include "loom/config/config.h"
#include "loom/model/model.h"

namespace loom::train {

struct WholeModel {
  config::ModelConfig config;
  model::Model model;
  std::string tokenizer;  // data.tokenizer of the run that wrote it ("" = bytes, or unknown)
  int64_t step = 0;
};

// path: a checkpoint folder (or one of its step folders). UsageError (one line) when it is
// missing, damaged, or lacks a parameter of its model.
WholeModel load_whole_model(const std::string& path, torch::Device device = torch::kCPU);

// The whole model's parameters by global name ("blocks.3.q.weight").
std::map<std::string, torch::Tensor> named_parameters(const model::Model& m);

}  // namespace loom::train
