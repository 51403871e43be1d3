#pragma once
// Internal to interop/: what differs between the Hugging Face model families loom reads and
// writes. hf.cpp does the rest (folders, files, checks, the checkpoint).
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "loom/config/config.h"

namespace loom::interop::detail {

// Where a loom parameter lives in the Hugging Face file.
struct HfTensor {
  std::string name;         // "transformer.h.0.attn.c_attn.weight"
  bool transposed = false;  // stored as its transpose (GPT-2's Conv1D keeps [in, out])
};

struct Family {
  config::ModelKind kind;
  const char* model_type;    // config.json's "model_type"
  const char* architecture;  // the transformers class
  // config.json for a loom model; UsageError when the class cannot hold it.
  nlohmann::json (*to_config)(const config::ModelConfig& c);
  // The loom model of a config.json (from: the folder, for messages). seq_len 0: the model's
  // context length, at most 4096.
  config::ModelConfig (*from_config)(const nlohmann::json& cfg, const std::string& from,
                                     int64_t seq_len);
  // loom name ("blocks.1.qkv.weight") -> its place in the file; c: the model.
  HfTensor (*tensor)(const std::string& loom_name, const config::ModelConfig& c);
};

const Family& llama_family();
const Family& gpt2_family();

// "blocks.3.q.weight" -> {3, "q.weight"}; throws on a name of another form.
std::pair<int64_t, std::string> split_name(const std::string& loom_name);
// cfg[key], or UsageError naming the folder and the key.
const nlohmann::json& need(const nlohmann::json& cfg, const std::string& from, const char* key);
// The context length to train with: seq_len, else the model's `positions`, at most 4096.
int64_t context_length(int64_t seq_len, int64_t positions);

}  // namespace loom::interop::detail
