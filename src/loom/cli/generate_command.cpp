// loom generate: text from a checkpoint, whatever layout trained it (train/whole_model.h).
#include <cmath>
#include <cstdio>
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/data/tokenizer.h"
#include "loom/flags/flags.h"
#include "loom/interop/safetensors.h"
#include "loom/model/compute.h"
#include "loom/model/generate.h"
#include "loom/train/whole_model.h"

namespace loom::cli {
namespace {

const char* kUsage = R"(usage: loom generate --checkpoint DIR --prompt TEXT [flags]

Continues TEXT with the model of a checkpoint (gpt or llama), whatever layout trained it
(pipeline, data or tensor parallel, any dp-mode), in this one process. The prompt is run once,
then each new token reuses the keys and values of the earlier ones (a KV cache).

  --checkpoint DIR    a run's folder (runs/NAME), its checkpoint folder or one of its steps
  --prompt TEXT       the text to continue
  --max-tokens N      new tokens (64); past the model's context, from its last seq_len tokens
  --temperature T     1.0; 0 = greedy (always the most likely token)
  --top-k K           sample among the K most likely tokens; 0 = all (0)
  --seed S            the sampler's seed (0)
  --tokenizer FILE    SentencePiece model; default: the run's data.tokenizer (bytes if none)
  --device cpu|cuda   where to compute (cpu)
  --no-cache          recompute the whole sequence for every token (slower; for comparison)
  --dump-logits FILE  also write the prompt's logits [tokens, vocab] as safetensors ("logits")

  loom generate --checkpoint runs/demo/checkpoint --prompt "The " --max-tokens 80
)";

}  // namespace

int generate_command(const std::vector<std::string>& args) {
  const flags::Parsed a = flags::parse(args, {"generate",
                                              {{"checkpoint", "runs/demo/checkpoint"},
                                               {"prompt", "The "},
                                               {"max-tokens", "64"},
                                               {"temperature", "1.0"},
                                               {"top-k", "0"},
                                               {"seed", "0"},
                                               {"tokenizer", "tok.model"},
                                               {"device", "cpu"},
                                               {"no-cache", ""},
                                               {"dump-logits", "logits.safetensors"}}});
  if (a.help) {
    std::cout << kUsage;
    return 0;
  }
  if (!a.has("checkpoint") || !a.has("prompt"))
    LOOM_USAGE("loom generate needs --checkpoint DIR and --prompt TEXT; see loom generate --help");
  model::SampleOptions o;
  o.max_tokens = flags::to_int64("max-tokens", a.get("max-tokens", "64"), 1, 1 << 20);
  o.top_k = flags::to_int64("top-k", a.get("top-k", "0"), 0, 1 << 30);
  o.seed = static_cast<uint64_t>(flags::to_int64("seed", a.get("seed", "0"), 0, INT64_MAX));
  o.kv_cache = !a.has("no-cache");
  const std::string t = a.get("temperature", "1.0");
  try {
    o.temperature = std::stod(t);
  } catch (const std::exception&) {
    o.temperature = -1;
  }
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    LOOM_USAGE("--temperature must be a finite number >= 0, got '", t, "'");
  const auto device = config::parse_choice<config::Device>(a.get("device", "cpu"));
  if (!device) LOOM_USAGE("--device must be cpu or cuda, got '", a.get("device"), "'");
  const torch::Device where = model::select_device(*device, 0);
  train::WholeModel w = train::load_whole_model(a.get("checkpoint"), where);
  if (!config::is_transformer(w.config.kind))
    LOOM_USAGE("the checkpoint holds a ", w.config.kind,
               ", which does not generate text; generate from a gpt or llama");
  const auto tokenizer = data::open_tokenizer_for(a.get("tokenizer", w.tokenizer), w.config.vocab);
  const std::vector<int64_t> prompt = tokenizer->encode(a.get("prompt"));
  if (a.has("dump-logits"))
    interop::write_safetensors(a.get("dump-logits"),
                               {{"logits", model::logits_of(w.model, prompt)}},
                               "pass a writable path to --dump-logits");
  const std::vector<int64_t> out = model::generate(w.model, w.config.seq_len, prompt, o);
  std::cout << a.get("prompt") << tokenizer->decode(out) << "\n";
  return 0;
}

}  // namespace loom::cli
