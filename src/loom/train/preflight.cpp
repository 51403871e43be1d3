#include "loom/train/preflight.h"

#include <filesystem>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/data/dataset.h"
#include "loom/data/tokenizer.h"
#include "loom/model/compute.h"
#include "loom/model/model.h"
#include "loom/model/partition.h"
#include "loom/model/spec.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/io.h"
#include "loom/schedule/validate.h"
#include "loom/train/run_lock.h"

namespace loom::train {
namespace fs = std::filesystem;

std::string default_data_path(const config::Config& cfg) {
  if (!cfg.data.path.empty()) return cfg.data.path;
  if (cfg.data.kind == config::DataKind::FashionMnist) return "/usr/share/datasets/fashion-mnist";
  if (cfg.data.kind == config::DataKind::Text) return "/usr/share/games/fortunes";
  return "";
}

namespace {

// A folder's path, absolute, without "..", "." or a trailing "/".
fs::path absolute_folder(fs::path p) {
  std::error_code ec;
  p = fs::weakly_canonical(p.empty() ? "." : p, ec).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

// A folder that holds a run's metrics or checkpoints belongs to that run: a new run there
// would truncate its metrics and delete its checkpoints, and a later --resume of it would
// continue the wrong run. So would a run resumed there from another folder's checkpoint (its
// saves replace that run's checkpoints of the same steps, its metrics join that run's).
void check_run_folder(const config::OutputConfig& o) {
  if (o.overwrite || resumes_own_folder(o)) return;
  const fs::path dir(o.dir);
  std::error_code ec;
  const bool metrics = fs::exists(dir / "metrics.jsonl", ec);
  const bool checkpoints =
      fs::is_directory(dir / "checkpoint", ec) && !fs::is_empty(dir / "checkpoint", ec);
  if (!metrics && !checkpoints) return;
  const char* held = metrics && checkpoints ? "metrics.jsonl, checkpoint/"
                     : metrics              ? "metrics.jsonl"
                                            : "checkpoint/";
  if (!o.resume.empty())
    LOOM_USAGE("output folder '", o.dir, "' holds another run (", held, "), and --resume ",
               o.resume,
               " is not in it: continuing that checkpoint there would replace the run's; "
               "choose another --output.dir, or replace the run with --overwrite");
  LOOM_USAGE("output folder '", o.dir, "' holds another run (", held,
             "); continue it with --resume ", (dir / "checkpoint").string(),
             ", replace it with --overwrite, or choose another --output.dir");
}

}  // namespace

bool resumes_own_folder(const config::OutputConfig& o) {
  if (o.resume.empty()) return false;
  // The run folder itself, its checkpoint folder, or a step folder in it; by what the paths
  // lead to (a checkpoint folder may be a link to another disk).
  auto same = [](const fs::path& a, const fs::path& b) {
    std::error_code ec;
    return fs::equivalent(a, b, ec);
  };
  const fs::path from = absolute_folder(fs::path(o.resume).lexically_normal());
  const fs::path dir = o.dir, root = dir / "checkpoint";
  return same(from, dir) || same(from, root) || same(from.parent_path(), root);
}

void prepare_output_dir(const config::OutputConfig& o) {
  check_run_folder(o);
  const std::string& dir = o.dir;
  std::error_code ec;
  // The timeline is written after the last step: a bad path must not wait until then. It is
  // checked before the run's folder is made (a refusal leaves no folder behind), or after, when
  // it goes into that folder.
  constexpr const char* kTraceFix = "pass a writable file path to --output.trace, or leave it out";
  const bool trace_in_run_folder =
      !o.trace.empty() && absolute_folder(fs::path(o.trace).parent_path()) == absolute_folder(dir);
  if (!o.trace.empty() && !trace_in_run_folder) check_writable_path(o.trace, kTraceFix);
  const bool made = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    LOOM_USAGE("cannot create output folder '", dir, "' (", ec ? ec.message() : "not a folder",
               "); pass a writable folder with --output.dir");
  check_writable_folder(dir, "pass a writable folder with --output.dir");
  if (trace_in_run_folder) check_writable_path(o.trace, kTraceFix);
  lock_output_folder(dir, made);
}

namespace {

// Megatron-style tensor parallelism splits attention heads, the MLP's hidden units and the
// vocabulary: each must divide.
void check_tensor_parallel(const config::Config& cfg, int tp) {
  const auto& m = cfg.model;
  if (!config::is_transformer(m.kind))
    LOOM_USAGE("parallel.tp = ", tp, " splits a transformer, but model.kind is '", m.kind,
               "'; use --tp 1 with it, or model.kind = gpt");
  if (m.heads % tp != 0)
    LOOM_USAGE("parallel.tp (", tp, ") must divide model.heads (", m.heads,
               "): each tensor-parallel rank computes whole heads; choose --tp among the "
               "divisors of ",
               m.heads);
  if (m.vocab % tp != 0)
    LOOM_USAGE("parallel.tp (", tp, ") must divide model.vocab (", m.vocab,
               "): the embedding and the head are split by vocabulary; choose --vocab a multiple "
               "of ",
               tp);
  if (m.kind == config::ModelKind::Llama) {
    const int64_t kv = m.kv_heads ? m.kv_heads : m.heads, ffn = config::llama_ffn_width(m);
    if (kv % tp != 0)
      LOOM_USAGE("parallel.tp (", tp, ") must divide model.kv_heads (", kv,
                 "): each tensor-parallel rank computes whole key/value heads");
    if (ffn % tp != 0)
      LOOM_USAGE("parallel.tp (", tp, ") must divide the SwiGLU width (", ffn,
                 "); set --ffn-width to a multiple of ", tp);
  }
}

}  // namespace

Resolved preflight(const config::Config& cfg, int world, bool check_output) {
  config::validate(cfg);
  // NCCL moves CUDA tensors only.
  if (cfg.parallel.comm == config::CommChoice::Nccl && cfg.train.device != config::Device::Cuda)
    LOOM_USAGE("parallel.comm nccl needs CUDA tensors, but train.device is ", cfg.train.device,
               "; add --device cuda, or use --comm gloo or mpi");
  Resolved r;
  r.pp = static_cast<int>(cfg.parallel.pp);
  r.tp = static_cast<int>(cfg.parallel.tp);
  r.loops = static_cast<int>(cfg.parallel.loops);
  r.m = static_cast<int>(cfg.train.microbatches);
  const int pt = r.pp * r.tp;
  if (world % pt != 0)
    LOOM_USAGE("pp (", r.pp, ") x tp (", r.tp, ") does not divide the number of ranks (", world,
               "); choose --pp and --tp whose product divides ", world, " or change --nproc");
  r.dp = cfg.parallel.dp == 0 ? world / pt : static_cast<int>(cfg.parallel.dp);
  if (r.dp * pt != world)
    LOOM_USAGE("dp (", r.dp, ") x pp (", r.pp, ") x tp (", r.tp, ") = ", r.dp * pt, " but ", world,
               " ranks were launched; set --dp ", world / pt, " (or 0 for automatic) or --nproc ",
               r.dp * pt);
  if (r.tp > 1) check_tensor_parallel(cfg, r.tp);
  if (cfg.parallel.sequence_parallel && r.tp == 1)
    LOOM_USAGE("parallel.sequence_parallel splits the sequence over the tensor-parallel ranks, ",
               "but tp is 1; set --tp 2 (or more) or drop --sequence-parallel");
  if (cfg.parallel.sequence_parallel && cfg.model.seq_len % r.tp != 0)
    LOOM_USAGE("parallel.sequence_parallel needs tp (", r.tp, ") to divide model.seq_len (",
               cfg.model.seq_len, "); choose --seq-len a multiple of ", r.tp);
  if (cfg.parallel.recompute != config::Recompute::None && !config::is_transformer(cfg.model.kind))
    LOOM_USAGE("parallel.recompute = ", cfg.parallel.recompute,
               " recomputes transformer layers, but model.kind is '", cfg.model.kind,
               "'; use --recompute none with it");
  model::check_device(cfg.train.device);
  if (cfg.output.sample_every > 0 && !config::is_transformer(cfg.model.kind))
    LOOM_USAGE("output.sample_every prints text from a language model, but model.kind is '",
               cfg.model.kind, "'; set it to 0 or train a gpt or llama");
  if (cfg.model.head_bias && cfg.model.kind != config::ModelKind::Gpt)
    LOOM_USAGE("model.head_bias is the GPT's (model.kind = gpt), but model.kind is '",
               cfg.model.kind, "'; drop it");
  if (cfg.model.head_bias && cfg.model.tie_embeddings)
    LOOM_USAGE("model.head_bias and model.tie_embeddings: a head tied to the token embedding has ",
               "no bias of its own; drop one of them");
  int64_t per = int64_t(r.dp) * r.m;
  if (cfg.train.global_batch % per != 0)
    LOOM_USAGE("train.global_batch (", cfg.train.global_batch, ") is not divisible by dp (", r.dp,
               ") x microbatches (", r.m, ") = ", per, "; choose a multiple of ", per);
  r.micro_batch = cfg.train.global_batch / per;

  // Model cut and schedule.
  int stages = r.pp * r.loops;
  std::vector<double> unit(model::spec_of(cfg.model).blocks, 1.0);
  model::partition(unit, stages,
                   cfg.parallel.partition == "flops" ? "uniform" : cfg.parallel.partition);
  schedule::Shape shape{r.pp, r.loops, r.m};
  if (!cfg.parallel.schedule_file.empty()) {
    schedule::Schedule s = schedule::load_csv(cfg.parallel.schedule_file);
    if (s.shape.pp != r.pp || s.shape.loops != r.loops || s.shape.microbatches != r.m)
      LOOM_USAGE("schedule file '", cfg.parallel.schedule_file, "' is for pp=", s.shape.pp,
                 " loops=", s.shape.loops, " microbatches=", s.shape.microbatches,
                 " but the run has pp=", r.pp, " loops=", r.loops, " microbatches=", r.m,
                 "; set --pp/--loops/--microbatches to match");
    if (const schedule::ValidationResult v = schedule::check(s); !v.ok)
      LOOM_USAGE("schedule file '", cfg.parallel.schedule_file,
                 "' is not a valid schedule: ", v.message, "; fix it (`loom schedule --file ",
                 cfg.parallel.schedule_file, "` marks the action)");
    r.placement = s.shape.placement;
  } else {
    std::string why = schedule::unsupported_reason(cfg.parallel.schedule, shape);
    if (!why.empty()) LOOM_USAGE(why);
    r.placement = schedule::placement_of(cfg.parallel.schedule);
  }

  if (cfg.output.calibrate_every > 0 && !config::is_transformer(cfg.model.kind))
    LOOM_USAGE("output.calibrate_every times a transformer layer, but model.kind is '",
               cfg.model.kind, "'; use it with model.kind = gpt or llama, or set it to 0");
  if (cfg.output.calibrate_every > 0 && cfg.train.device == config::Device::Cuda)
    LOOM_USAGE(
        "output.calibrate_every times the CPU cores a rank shares (the simulator's "
        "core-sharing model), which says nothing of a GPU; set it to 0 with --device cuda");

  // Data: open both splits (the test split is read at the last step: fail now, not then).
  std::string path = default_data_path(cfg);
  if (cfg.data.kind == config::DataKind::FashionMnist) {
    data::open_idx_images(path, data::Split::Train);
    data::open_idx_images(path, data::Split::Test);
  } else if (cfg.data.kind == config::DataKind::Text) {
    // Every token value (a byte, or a piece of the tokenizer) must have an embedding row.
    const auto tokenizer = data::open_tokenizer(cfg.data.tokenizer);
    if (cfg.data.tokenizer.empty() && cfg.model.vocab < 256)
      LOOM_USAGE("data.kind = text reads bytes (256 token values) but model.vocab is ",
                 cfg.model.vocab, "; set --vocab 256 (or more)");
    if (cfg.model.vocab < tokenizer->vocab_size())
      LOOM_USAGE("data.tokenizer '", cfg.data.tokenizer, "' has ", tokenizer->vocab_size(),
                 " pieces but model.vocab is ", cfg.model.vocab, "; set --vocab ",
                 tokenizer->vocab_size(), " (or more)");
    // With a tokenizer, the first of these tokenizes the corpus into its cache (once).
    data::open_text(path, cfg.model.seq_len, data::Split::Train, cfg.data.test_fraction,
                    cfg.data.tokenizer);
    data::open_text(path, cfg.model.seq_len, data::Split::Test, cfg.data.test_fraction,
                    cfg.data.tokenizer);
  }
  if (check_output) prepare_output_dir(cfg.output);
  return r;
}

}  // namespace loom::train
