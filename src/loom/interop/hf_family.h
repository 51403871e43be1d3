#pragma once
// Internal to interop/: what differs between the Hugging Face model families loom reads and
// writes. hf.cpp does the rest (folders, files, checks, the checkpoint).
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
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

// UsageError: config.json lacks `key`.
[[noreturn]] void missing(const std::string& from, const char* key);

// "blocks.3.q.weight" -> {3, "q.weight"}; throws on a name of another form.
std::pair<int64_t, std::string> split_name(const std::string& loom_name);
// UsageError: config.json's `key` holds `value`, not `wanted` ("an integer").
[[noreturn]] void wrong_type(const std::string& from, const char* key, const nlohmann::json& value,
                             const char* wanted);

// A config.json value as T (int64_t, double, bool or std::string), or UsageError naming the
// folder, the key and the type it needs (nlohmann's own error names neither).
template <class T>
T as(const nlohmann::json& v, const std::string& from, const char* key) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) wrong_type(from, key, v, "true or false");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) wrong_type(from, key, v, "an integer");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) wrong_type(from, key, v, "a number");
  } else {
    if (!v.is_string()) wrong_type(from, key, v, "a string");
  }
  return v.get<T>();
}

// cfg[key] as T, or UsageError naming the folder and the key when it is missing.
template <class T>
T need(const nlohmann::json& cfg, const std::string& from, const char* key) {
  if (!cfg.contains(key)) missing(from, key);
  return as<T>(cfg.at(key), from, key);
}

// cfg[key] as T, or `fallback` when the key is missing or null (transformers writes null for
// an unset option).
template <class T>
T value_or(const nlohmann::json& cfg, const std::string& from, const char* key, T fallback) {
  if (!cfg.contains(key) || cfg.at(key).is_null()) return fallback;
  return as<T>(cfg.at(key), from, key);
}
// The context length to train with: seq_len, else the model's `positions`, at most 4096.
int64_t context_length(int64_t seq_len, int64_t positions);

}  // namespace loom::interop::detail
