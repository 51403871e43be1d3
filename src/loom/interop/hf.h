#pragma once
// loom models as Hugging Face model folders and back:
//   config.json        the architecture (LlamaForCausalLM for model.kind = llama,
//                      GPT2LMHeadModel for gpt)
//   model.safetensors  the weights under Hugging Face's names, float32
//   tokenizer.model    the run's SentencePiece model, when it had one
// loom's layers compute what those classes compute (model/llama.cpp, model/gpt.cpp), so the
// logits agree.
#include <string>

#include "loom/config/config.h"
#include "loom/train/whole_model.h"

namespace loom::interop {

// Writes `out` (a new or empty folder). UsageError (one line) for a model Hugging Face's
// classes cannot hold (an MLP, a GPT whose head has a bias). tokenizer: the SentencePiece
// model to copy ("" for none). Returns the architecture written ("GPT2LMHeadModel").
std::string export_hf(const train::WholeModel& w, const std::string& out,
                      const std::string& tokenizer);

// A loom checkpoint (consolidated: any layout resumes from it) at `out` from the Hugging Face
// folder `from` (model_type llama or gpt2). seq_len 0: the model's context length, at most
// 4096. Returns the model's configuration.
config::ModelConfig import_hf(const std::string& from, const std::string& out, int64_t seq_len);

}  // namespace loom::interop
