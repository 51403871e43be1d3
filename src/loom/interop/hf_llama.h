#pragma once
// loom's Llama as a Hugging Face model folder (LlamaForCausalLM) and back:
//   config.json        the architecture (hidden_size, num_key_value_heads, rope_theta, ...)
//   model.safetensors  the weights under Hugging Face's names, float32
//   tokenizer.model    the run's SentencePiece model, when it had one
// loom's layers compute what LlamaForCausalLM computes (model/llama.cpp), so the logits agree.
#include <map>
#include <string>

#include "loom/config/config.h"
#include "loom/train/whole_model.h"

namespace loom::interop {

// The Hugging Face name of a loom Llama parameter ("blocks.1.q.weight" ->
// "model.layers.0.self_attn.q_proj.weight"); layers: the model's transformer layers.
std::string hf_name(const std::string& loom_name, int64_t layers);

// Writes `out` (a new or empty folder). UsageError for a model kind Hugging Face's Llama cannot
// hold. tokenizer: the SentencePiece model to copy ("" for none).
void export_llama(const train::WholeModel& w, const std::string& out, const std::string& tokenizer);

// A loom checkpoint (consolidated: any layout resumes from it) at `out` from the Hugging Face
// folder `from` (LlamaForCausalLM). seq_len 0: the model's max_position_embeddings, at most 4096.
// Returns the model's configuration.
config::ModelConfig import_llama(const std::string& from, const std::string& out, int64_t seq_len);

}  // namespace loom::interop
