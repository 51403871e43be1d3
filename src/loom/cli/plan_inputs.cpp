// The inputs of loom simulate and loom plan: the model, the cluster and the layout from flags,
// or a `loom train` configuration (--from-config) resolved exactly as the trainer resolves it
// (same preflight, same model cut), so that a prediction can be compared with a real run
// (bench/predict_vs_measure.sh).
#include "loom/cli/plan_inputs.h"

#include <iostream>

#include "loom/common/error.h"
#include "loom/model/model.h"
#include "loom/model/partition.h"
#include "loom/train/preflight.h"

namespace loom::cli {

using flags::Flag;
using flags::to_int;
using flags::to_int64;

namespace {

// The model and the cluster, for simulate and plan.
const std::vector<Flag> kModelFlags = {
    {"model", "gpt"},   {"layers", "24"},       {"width", "2048"},
    {"heads", "16"},    {"seq-len", "2048"},    {"vocab", "51200"},
    {"no-dropout", ""}, {"precision", "bf16"},  {"cluster", "clusters/a100-80gb.toml"},
    {"kv-heads", "8"},  {"ffn-width", "11008"}, {"tie-embeddings", ""},
    {"megatron", ""}};

// gpt or llama, from --model (default gpt).
plan::Arch arch_from_flag(const flags::Parsed& a) {
  const std::string kind = a.get("model", "gpt");
  if (kind != "gpt" && kind != "llama")
    LOOM_USAGE("--model must be gpt or llama (the transformers the simulator models), got '", kind,
               "'");
  return kind == "gpt" ? plan::Arch::Gpt : plan::Arch::Llama;
}

// --kv-heads, --ffn-width and --tie-embeddings on top of `m`.
void apply_llama_flags(const flags::Parsed& a, plan::Transformer& m) {
  if (m.arch != plan::Arch::Llama)
    for (const char* k : {"kv-heads", "ffn-width"})
      if (a.has(k)) LOOM_USAGE("--", k, " describes a llama; add --model llama or drop it");
  if (a.has("kv-heads")) m.kv_heads = to_int64("kv-heads", a.get("kv-heads"), 1, 1 << 16);
  if (a.has("ffn-width")) m.ffn = to_int64("ffn-width", a.get("ffn-width"), 1, 1 << 26);
  if (a.has("tie-embeddings")) m.tied = true;
}

// Global batch G = dp x m x b: derives the part named (from the two others, given as flags or
// taken from defaults or a file); with none to derive, checks that the three agree.
enum class BatchPart { None, Global, Count, Size };
void complete_batch(int64_t dp, BatchPart derive, int64_t& G, int64_t& m, int64_t& b) {
  switch (derive) {
    case BatchPart::Global: G = dp * m * b; break;
    case BatchPart::Count:
      if (G % (dp * b))
        LOOM_USAGE("--global-batch ", G, " is not divisible by dp x micro-batch-size = ", dp * b);
      m = G / (dp * b);
      break;
    case BatchPart::Size:
      if (G % (dp * m))
        LOOM_USAGE("--global-batch ", G, " is not divisible by dp x microbatches = ", dp * m);
      b = G / (dp * m);
      break;
    case BatchPart::None:
      if (G != dp * m * b)
        LOOM_USAGE("dp x microbatches x micro-batch-size = ", dp * m * b, " but --global-batch is ",
                   G, "; give two of the three");
  }
}

}  // namespace

std::vector<Flag> with_model_flags(std::vector<Flag> own) {
  own.insert(own.begin(), kModelFlags.begin(), kModelFlags.end());
  return own;
}

plan::Transformer model_from_flags(const flags::Parsed& a) {
  const plan::Arch arch = arch_from_flag(a);
  for (const char* k : {"layers", "width", "heads", "seq-len"})
    if (!a.has(k)) LOOM_USAGE("--", k, " is required (or use --from-config FILE)");
  plan::Transformer m;
  m.arch = arch;
  m.layers = to_int64("layers", a.get("layers"), 1, config::kMaxLayers);
  m.hidden = to_int64("width", a.get("width"), 1, config::kMaxWidth);
  m.heads = to_int64("heads", a.get("heads"), 1, 1 << 16);
  m.seq_len = to_int64("seq-len", a.get("seq-len"), 1, config::kMaxSeqLen);
  m.vocab = to_int64("vocab", a.get("vocab", "51200"), 1, int64_t(1) << 30);
  m.dropout = !a.has("no-dropout");  // Megatron's GPT has it; a Llama never (has_dropout)
  apply_llama_flags(a, m);
  return m;
}

plan::Cluster cluster_from_flags(const flags::Parsed& a) {
  if (!a.has("cluster"))
    LOOM_USAGE(
        "--cluster is required: one of clusters/*.toml, or write one with "
        "loom profile --out clusters/this-machine.toml");
  plan::Cluster c = plan::load_cluster(a.get("cluster"));
  const std::string warning = plan::other_cpu_warning(c);
  if (!warning.empty()) std::cerr << warning << "\n";
  return c;
}

// Configuration flags on top of `p` (from a config file or defaults).
void apply_parallel_flags(const flags::Parsed& a, plan::Parallel& p, bool from_config) {
  if (a.has("pp")) p.pp = to_int("pp", a.get("pp"), 1, 1 << 16);
  if (a.has("tp")) p.tp = to_int("tp", a.get("tp"), 1, 1 << 10);
  if (a.has("loops")) p.loops = to_int("loops", a.get("loops"), 1, 1024);
  if (a.has("schedule")) p.schedule = a.get("schedule");
  if (a.has("dp-mode")) {
    p.dp_mode = plan::parse_dp_mode(a.get("dp-mode"));
    plan::check_simulated(p.dp_mode, from_config);
  }
  if (a.has("recompute")) p.recompute = plan::parse_recompute(a.get("recompute"));
  if (a.has("attention")) p.attention = plan::parse_attention(a.get("attention"));
  if (a.has("sequence-parallel")) p.sequence_parallel = true;
  if (a.has("tp-comm-overlap")) p.tp_comm_overlap = true;
  if (a.has("megatron")) p.megatron = true;
  if (a.has("distributed-optimizer")) {
    if (a.has("dp-mode") && p.dp_mode != plan::DpMode::Zero1)
      LOOM_USAGE("--distributed-optimizer shards the optimizer state as zero1; drop --dp-mode ",
                 config::name_of(p.dp_mode), " or use --dp-mode zero1");
    p.dp_mode = plan::DpMode::Zero1;
    p.distributed_optimizer = true;
  }
  if (a.has("no-reshard-after-forward")) p.reshard_after_forward = false;
  if (a.has("placement")) {
    const auto o = config::parse_choice<config::RankOrder>(a.get("placement"));
    if (!o)
      LOOM_USAGE("--placement must be dp-inside or pipeline-inside, got '", a.get("placement"),
                 "'");
    p.placement = *o;
  }
  if (a.has("max-unsharded"))
    p.max_unsharded = to_int("max-unsharded", a.get("max-unsharded"), 1, 1 << 16);
  if (from_config) return;
  const int gpus = a.has("gpus") ? to_int("gpus", a.get("gpus"), 1, 1 << 24) : 0;
  if (a.has("dp")) {
    p.dp = to_int("dp", a.get("dp"), 1, 1 << 24);
  } else if (gpus) {
    if (gpus % (p.pp * p.tp))
      LOOM_USAGE("--gpus ", gpus, " is not divisible by pp x tp = ", p.pp * p.tp,
                 "; choose pp and tp among its divisors");
    p.dp = gpus / (p.pp * p.tp);
  }
  if (gpus && p.gpus() != gpus)
    LOOM_USAGE("dp x pp x tp = ", p.dp, " x ", p.pp, " x ", p.tp, " = ", p.gpus(),
               " but --gpus is ", gpus, "; drop --dp or fix one of them");
  const bool has_m = a.has("microbatches"), has_b = a.has("micro-batch-size");
  if (has_m)
    p.microbatches = to_int("microbatches", a.get("microbatches"), 1, config::kMaxMicrobatches);
  if (has_b) p.micro_batch = to_int64("micro-batch-size", a.get("micro-batch-size"), 1, 1 << 20);
  if (a.has("global-batch")) {
    int64_t G = to_int64("global-batch", a.get("global-batch"), 1, int64_t(1) << 40),
            m = p.microbatches;
    complete_batch(p.dp,
                   has_m && has_b ? BatchPart::None
                   : has_m        ? BatchPart::Size
                                  : BatchPart::Count,
                   G, m, p.micro_batch);
    if (m > config::kMaxMicrobatches)
      LOOM_USAGE("--global-batch ", G, " makes ", m, " micro-batches per replica, more than ",
                 config::kMaxMicrobatches, "; give a larger --micro-batch-size");
    p.microbatches = static_cast<int>(m);
  } else if (!has_m) {
    p.microbatches = p.pp;  // the smallest count that fills the pipeline
  }
}

// The `loom train` configuration of --from-config with the model flags given on top.
config::Config config_with_model_flags(const flags::Parsed& a) {
  config::Config cfg = config::load_file(a.get("from-config"));
  // The model flags override the file's model, as the configuration flags do.
  if (a.has("model"))
    cfg.model.kind =
        arch_from_flag(a) == plan::Arch::Gpt ? config::ModelKind::Gpt : config::ModelKind::Llama;
  if (!config::is_transformer(cfg.model.kind))
    LOOM_USAGE("--from-config needs a gpt or llama model (model.kind), got '", cfg.model.kind, "'");
  if (a.has("layers"))
    cfg.model.layers = to_int64("layers", a.get("layers"), 1, config::kMaxLayers);
  if (a.has("width")) cfg.model.width = to_int64("width", a.get("width"), 1, config::kMaxWidth);
  if (a.has("heads")) cfg.model.heads = to_int64("heads", a.get("heads"), 1, 1 << 16);
  if (a.has("seq-len"))
    cfg.model.seq_len = to_int64("seq-len", a.get("seq-len"), 1, config::kMaxSeqLen);
  if (a.has("vocab")) cfg.model.vocab = to_int64("vocab", a.get("vocab"), 1, int64_t(1) << 30);
  {
    plan::Transformer flagged = plan::transformer_of(cfg.model);
    apply_llama_flags(a, flagged);
    cfg.model.kv_heads = flagged.kv_heads;
    if (a.has("ffn-width")) cfg.model.ffn_width = flagged.ffn;
    cfg.model.tie_embeddings = flagged.tied;
  }
  return cfg;
}

// A `loom train` configuration resolved as the trainer resolves it.
void from_config(const flags::Parsed& a, plan::Transformer* m, plan::Parallel* p,
                 std::vector<int>* cut) {
  config::Config cfg = config_with_model_flags(a);
  if (a.has("pp")) cfg.parallel.pp = to_int("pp", a.get("pp"), 1, 1 << 16);
  if (a.has("dp")) cfg.parallel.dp = to_int("dp", a.get("dp"), 1, 1 << 16);
  if (a.has("tp")) cfg.parallel.tp = to_int("tp", a.get("tp"), 1, 1 << 10);
  if (a.has("loops")) cfg.parallel.loops = to_int("loops", a.get("loops"), 1, 1024);
  if (a.has("schedule")) cfg.parallel.schedule = a.get("schedule");
  if (a.has("dp-mode")) cfg.parallel.dp_mode = plan::parse_dp_mode(a.get("dp-mode"));
  if (a.has("microbatches"))
    cfg.train.microbatches = to_int("microbatches", a.get("microbatches"), 1, 1 << 20);
  if (a.has("global-batch"))
    cfg.train.global_batch = to_int64("global-batch", a.get("global-batch"), 1, 1 << 30);
  const int tp_pp = static_cast<int>(cfg.parallel.pp * cfg.parallel.tp);
  if (a.has("gpus") && !a.has("dp")) {
    const int gpus = to_int("gpus", a.get("gpus"), 1, 1 << 24);
    if (gpus % tp_pp)
      LOOM_USAGE("--gpus ", gpus, " is not divisible by pp x tp = ", tp_pp,
                 "; choose pp and tp among its divisors");
    cfg.parallel.dp = gpus / tp_pp;
  }
  const int dp = cfg.parallel.dp > 0 ? static_cast<int>(cfg.parallel.dp) : 1;
  if (a.has("gpus") && dp * tp_pp != to_int("gpus", a.get("gpus"), 1, 1 << 24))
    LOOM_USAGE("dp x pp x tp = ", dp * tp_pp, " but --gpus is ", a.get("gpus"),
               "; drop --dp or fix one of them");
  if (a.has("micro-batch-size")) {
    int64_t b = to_int64("micro-batch-size", a.get("micro-batch-size"), 1, 1 << 20);
    complete_batch(dp,
                   !a.has("global-batch")   ? BatchPart::Global
                   : !a.has("microbatches") ? BatchPart::Count
                                            : BatchPart::None,
                   cfg.train.global_batch, cfg.train.microbatches, b);
  }
  train::Resolved r = train::preflight(cfg, dp * tp_pp, false);
  *m = plan::transformer_of(cfg.model);
  p->dp = r.dp;
  p->pp = r.pp;
  p->tp = r.tp;
  p->sequence_parallel = p->sequence_parallel || cfg.parallel.sequence_parallel;
  p->recompute = cfg.parallel.recompute;  // --recompute overrides it (apply_parallel_flags)
  p->loops = r.loops;
  p->microbatches = r.m;
  p->micro_batch = r.micro_batch;
  p->schedule = cfg.parallel.schedule;
  plan::check_simulated(cfg.parallel.dp_mode, /*from_config=*/true);
  p->dp_mode = cfg.parallel.dp_mode;
  p->light = plan::light_dp(cfg);
  p->reshard_after_forward = cfg.parallel.reshard_after_forward;
  p->placement = cfg.parallel.placement;
  p->max_unsharded = static_cast<int>(cfg.parallel.max_unsharded);
  model::Model built = model::build(cfg.model, cfg.train.seed);
  std::vector<double> costs;
  for (auto& b : built.blocks) costs.push_back(b->flops_per_sample());
  *cut = model::partition(costs, r.pp * r.loops, cfg.parallel.partition,
                          r.shape().placement == schedule::Placement::V)
             .first;
}

}  // namespace loom::cli
