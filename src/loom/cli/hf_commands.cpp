// loom export / loom import: checkpoints as Hugging Face model folders and back
// (interop/hf.h).
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/data/tokenizer.h"
#include "loom/flags/flags.h"
#include "loom/interop/hf.h"
#include "loom/train/whole_model.h"

namespace loom::cli {
namespace {

const char* kExportUsage = R"(usage: loom export --checkpoint DIR --out DIR [--format hf]

Writes the model of a checkpoint (whatever layout trained it) as a Hugging Face folder that
transformers loads (AutoModelForCausalLM): a llama as LlamaForCausalLM, a gpt as
GPT2LMHeadModel (if trained with model.head_bias = false, the default: GPT-2's head has no
bias). The folder holds config.json, model.safetensors (float32) and, if the run had one, its
SentencePiece tokenizer as tokenizer.model.

  --checkpoint DIR   a run's folder, its checkpoint folder or one of its step folders
  --out DIR          a new (or empty) folder
  --format hf        the only format (default)
  --tokenizer FILE   the tokenizer to include; default: the run's data.tokenizer

  loom export --checkpoint runs/llama/checkpoint --out hf-llama
)";

const char* kImportUsage = R"(usage: loom import --from DIR --out DIR [--seq-len N]

Makes a loom checkpoint from a Hugging Face folder of a LlamaForCausalLM or a GPT2LMHeadModel
(config.json, model.safetensors in float32, bf16 or fp16): a consolidated checkpoint that
`loom train --resume DIR` continues in any layout. Prints the model flags the run needs.

  --from DIR      the Hugging Face folder
  --out DIR       a new (or empty) folder for the checkpoint
  --seq-len N     context length to train with; default: the model's (max_position_embeddings,
                  n_positions), at most 4096

  loom import --from hf-llama --out runs/imported
)";

}  // namespace

int export_command(const std::vector<std::string>& args) {
  const flags::Parsed a = flags::parse(args, {"export",
                                              {{"checkpoint", "runs/llama/checkpoint"},
                                               {"out", "hf-llama"},
                                               {"format", "hf"},
                                               {"tokenizer", "tok.model"}}});
  if (a.help) {
    std::cout << kExportUsage;
    return 0;
  }
  if (!a.has("checkpoint") || !a.has("out"))
    LOOM_USAGE("loom export needs --checkpoint DIR and --out DIR; see loom export --help");
  if (a.get("format", "hf") != "hf")
    LOOM_USAGE("--format must be hf (Hugging Face), got '", a.get("format"), "'");
  const train::WholeModel w = train::load_whole_model(a.get("checkpoint"));
  const std::string tokenizer = a.get("tokenizer", w.tokenizer);
  if (!tokenizer.empty()) data::open_tokenizer_for(tokenizer, w.config.vocab);  // a model, its size
  const std::string arch = interop::export_hf(w, a.get("out"), tokenizer);
  std::cout << "wrote " << a.get("out") << ": " << arch << ", config.json, model.safetensors (step "
            << w.step << ", " << w.model.num_parameters() << " parameters)\n";
  return 0;
}

int import_command(const std::vector<std::string>& args) {
  const flags::Parsed a = flags::parse(
      args, {"import", {{"from", "hf-llama"}, {"out", "runs/imported"}, {"seq-len", "2048"}}});
  if (a.help) {
    std::cout << kImportUsage;
    return 0;
  }
  if (!a.has("from") || !a.has("out"))
    LOOM_USAGE("loom import needs --from DIR and --out DIR; see loom import --help");
  const int64_t seq_len =
      a.has("seq-len") ? flags::to_int64("seq-len", a.get("seq-len"), 1, 1 << 20) : 0;
  const config::ModelConfig c = interop::import_hf(a.get("from"), a.get("out"), seq_len);
  std::cout << "wrote " << a.get("out") << "; continue it with\n  loom train --model.kind "
            << c.kind << " --vocab " << c.vocab << " --width " << c.width << " --layers "
            << c.layers << " --heads " << c.heads << " --seq-len " << c.seq_len;
  if (c.kind == config::ModelKind::Llama)
    std::cout << " --kv-heads " << c.kv_heads << " --ffn-width " << c.ffn_width << " --rope-theta "
              << c.rope_theta;
  std::cout << (c.tie_embeddings ? " --tie-embeddings" : "") << " --resume " << a.get("out")
            << " ...\n";
  return 0;
}

}  // namespace loom::cli
