// loom simulate and loom plan: predict one configuration, or search for the best one
// (src/loom/plan/). `--from-config` reads a `loom train` configuration and resolves it exactly
// as the trainer does (same preflight, same model cut), so the prediction can be compared
// with a real run (bench/predict_vs_measure.sh).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/config/config.h"
#include "loom/flags/flags.h"
#include "loom/model/model.h"
#include "loom/model/partition.h"
#include "loom/plan/evaluate.h"
#include "loom/plan/planner.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/io.h"
#include "loom/train/preflight.h"

namespace loom::cli {
namespace {

using flags::Flag;
using flags::to_int;
using flags::to_int64;

// The model and the cluster, for simulate and plan.
const std::vector<Flag> kModelFlags = {
    {"model", "gpt"},   {"layers", "24"},       {"width", "2048"},
    {"heads", "16"},    {"seq-len", "2048"},    {"vocab", "51200"},
    {"no-dropout", ""}, {"precision", "bf16"},  {"cluster", "clusters/a100-80gb.toml"},
    {"kv-heads", "8"},  {"ffn-width", "11008"}, {"tie-embeddings", ""},
    {"megatron", ""}};

std::vector<Flag> with_model_flags(std::vector<Flag> own) {
  own.insert(own.begin(), kModelFlags.begin(), kModelFlags.end());
  return own;
}

const char* kSimulateHelp =
    R"(usage: loom simulate --cluster FILE (model flags | --from-config FILE) [configuration]

Predicts one training step of a GPT or a Llama: step time, pipeline bubble, exposed
communication and peak memory per rank, by simulating the lowered schedule every rank runs.

model:  --model gpt|llama --layers L --width H --heads A --seq-len S [--vocab V (51200)]
        [--no-dropout (gpt)] [--kv-heads K --ffn-width F (llama: key/value heads, SwiGLU
        units; default the heads and a multiple of 64 >= 8H/3)] [--tie-embeddings]
        [--precision bf16|fp16|fp32 (the cluster's)] [--megatron: memory as Megatron-LM
        keeps it, not as loom's runtime does: bf16 parameters, gradients and residual stream
        with fp32 master weights in the optimizer (loom: autocast over fp32 ones), a stage's
        output freed once sent (loom keeps it until its backward)]
        or --from-config FILE: a `loom train` TOML (model, batch, pp, loops, schedule,
        dp-mode and the trainer's own model cut); the model flags given and the flags
        below override it
configuration:
        --gpus N  --dp D  --pp P  --tp T  (dp = N / (pp tp) when only --gpus is given)
        --loops V  --schedule gpipe|1f1b|interleaved|bfs|zb-h1|zbv|dualpipev (the last two:
        loops 2)
        --microbatches M  --micro-batch-size B  [--global-batch G: derives the missing one]
        --dp-mode allreduce|zero1|zero2|zero3  (with --from-config also slim, quant,
        diloco and streaming-diloco, their settings from the file)
        [--recompute none|selective|full]
        [--placement dp-inside|pipeline-inside: ranks numbered with the dp groups or the
         pipelines on consecutive ranks (nodes), as the trainer's parallel.placement]
        [--sequence-parallel] [--attention standard|flash]
        [--tp-comm-overlap: tensor-parallel collectives under the GEMMs, with
         --sequence-parallel, as far as the cluster's efficiency.tp_overlap says]
        [--distributed-optimizer: Megatron-Core's (zero1, fp32 gradients reduce-scattered,
         the parameter all-gather overlapped with the next step's forward)]
        [--blocking-p2p: each rank waits for its pipeline sends (Megatron-LM of 2021)]
        [--oversubscribed X: a shared (CPU) cluster's slowdown beyond the fair share of the
         cores when ranks outnumber them (overrides the file's [node] oversubscribed)]
        [--max-unsharded K (2)] [--no-reshard-after-forward]
        [--rank-speed S0,S1,..: compute-time multiplier per pipeline rank, e.g. 1.2,1 for
         a first rank 20% slower (a straggler, or the speeds measured during a run)]
output: [--svg FILE] [--trace FILE] [--json: one line of numbers]

example:
  loom simulate --model gpt --layers 64 --width 8192 --heads 64 --seq-len 2048 \
    --cluster clusters/a100-80gb.toml --gpus 512 --pp 8 --tp 8 --loops 4 --schedule bfs \
    --global-batch 512 --micro-batch-size 1 --dp-mode zero3 --recompute full
)";

const char* kPlanHelp =
    R"(usage: loom plan --cluster FILE --gpus N --global-batch G (model flags) [options]
       loom plan --cluster FILE --gpus N --from-config FILE [model flags] [options]

Searches dp x pp x tp (tp inside a node), micro-batch size, micro-batch count, loops,
schedule, dp-mode and recomputation; drops what does not fit in memory; ranks the rest by
simulated step time and explains why the winner wins.

model:   --model gpt|llama --layers L --width H --heads A --seq-len S [--vocab V]
         [--no-dropout] [--kv-heads K --ffn-width F (llama)] [--tie-embeddings]
         [--precision bf16|fp16|fp32] [--megatron]
         or --from-config FILE: the model and global batch of a `loom train` TOML (the
         flags given override them; the best configuration is printed as a command on it)
options: --top K (10)  --time-budget 30s  --memory-limit GB (90% of the device's)
         --schedules a,b  --dp-modes a,b  --micro-batch-sizes 1,2,4,8  --loops 1,2,4,8
         --recompute none,selective,full (all three)  --attention standard,flash (standard)
         --tp-comm-overlap on|off|both (off)  --distributed-optimizer on|off|both (off)
         --json (one line per ranked configuration)
Exits 2 with one line when no configuration fits.

example:
  loom plan --model gpt --layers 64 --width 8192 --heads 64 --seq-len 2048 \
    --cluster clusters/a100-80gb.toml --gpus 256 --global-batch 256 --top 10
)";

void write_file(const std::string& path, const std::string& text, const std::string& flag) {
  std::string tmp = path + ".tmp";
  std::ofstream f(tmp);
  if (!f || !(f << text) || !f.flush()) {
    std::remove(tmp.c_str());
    LOOM_USAGE("cannot write '", path, "'; pass a writable path to --", flag);
  }
  f.close();
  std::rename(tmp.c_str(), path.c_str());
  std::cerr << "wrote " << path << "\n";
}

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

plan::Transformer model_from_flags(const flags::Parsed& a) {
  const plan::Arch arch = arch_from_flag(a);
  for (const char* k : {"layers", "width", "heads", "seq-len"})
    if (!a.has(k)) LOOM_USAGE("--", k, " is required (or use --from-config FILE)");
  plan::Transformer m;
  m.arch = arch;
  m.layers = to_int64("layers", a.get("layers"), 1, 1 << 20);
  m.hidden = to_int64("width", a.get("width"), 1, 1 << 24);
  m.heads = to_int64("heads", a.get("heads"), 1, 1 << 16);
  m.seq_len = to_int64("seq-len", a.get("seq-len"), 1, 1 << 24);
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
  if (has_m) p.microbatches = to_int("microbatches", a.get("microbatches"), 1, 1 << 20);
  if (has_b) p.micro_batch = to_int64("micro-batch-size", a.get("micro-batch-size"), 1, 1 << 20);
  if (a.has("global-batch")) {
    int64_t G = to_int64("global-batch", a.get("global-batch"), 1, int64_t(1) << 40),
            m = p.microbatches;
    complete_batch(p.dp,
                   has_m && has_b ? BatchPart::None
                   : has_m        ? BatchPart::Size
                                  : BatchPart::Count,
                   G, m, p.micro_batch);
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
  if (a.has("layers")) cfg.model.layers = to_int64("layers", a.get("layers"), 1, 1 << 20);
  if (a.has("width")) cfg.model.width = to_int64("width", a.get("width"), 1, 1 << 24);
  if (a.has("heads")) cfg.model.heads = to_int64("heads", a.get("heads"), 1, 1 << 16);
  if (a.has("seq-len")) cfg.model.seq_len = to_int64("seq-len", a.get("seq-len"), 1, 1 << 24);
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

std::string json_line(const plan::Evaluation& e) {
  const plan::SimResult& r = e.sim;
  const plan::RankResult& r0 = r.ranks[0];
  std::ostringstream os;
  os.precision(6);
  os << "{\"configuration\":\"" << e.par.describe() << "\",\"step_s\":" << r.step_s
     << ",\"ideal_step_s\":" << r.ideal_step_s << ",\"bubble\":" << r.bubble_fraction
     << ",\"exposed_comm_s\":" << r.exposed_comm_s << ",\"tflops_per_device\":" << e.tflops_per_gpu
     << ",\"model_tflops_per_device\":" << e.model_tflops_per_gpu
     << ",\"peak_bytes\":" << r.peak_memory() << ",\"rank0_params_bytes\":" << r0.peak.params
     << ",\"rank0_grads_bytes\":" << r0.peak.grads
     << ",\"rank0_optimizer_bytes\":" << r0.peak.optimizer
     << ",\"fits\":" << (e.fits() ? "true" : "false")
     << ",\"memory_limit_bytes\":" << e.memory_limit
     << ",\"rank0_activation_bytes\":" << r0.peak.activations
     << ",\"rank0_working_bytes\":" << r0.peak.working
     << ",\"rank0_kept_activation_bytes\":" << r0.peak_kept
     << ",\"rank0_compute_s\":" << r0.compute_s << ",\"rank0_dp_bytes\":" << r0.dp_bytes
     << ",\"rank0_p2p_bytes\":" << r0.p2p_bytes << ",\"compute_source\":\"" << e.compute_source
     << "\"}\n";
  return os.str();
}

}  // namespace

int simulate_command(const std::vector<std::string>& args) {
  const flags::Parsed a = flags::parse(
      args, {"simulate", with_model_flags({{"from-config", "configs/gpt-fortunes.toml"},
                                           {"gpus", "8"},
                                           {"dp", "2"},
                                           {"pp", "2"},
                                           {"tp", "2"},
                                           {"loops", "2"},
                                           {"schedule", "bfs"},
                                           {"microbatches", "8"},
                                           {"micro-batch-size", "1"},
                                           {"global-batch", "64"},
                                           {"dp-mode", "zero3"},
                                           {"recompute", "selective"},
                                           {"attention", "flash"},
                                           {"sequence-parallel", ""},
                                           {"tp-comm-overlap", ""},
                                           {"distributed-optimizer", ""},
                                           {"blocking-p2p", ""},
                                           {"oversubscribed", "1.5"},
                                           {"max-unsharded", "2"},
                                           {"no-reshard-after-forward", ""},
                                           {"placement", "pipeline-inside"},
                                           {"rank-speed", "1.2,1"},
                                           {"svg", "step.svg"},
                                           {"trace", "step.json"},
                                           {"json", ""}})});
  if (a.help) {
    std::cout << kSimulateHelp;
    return 0;
  }
  plan::Cluster cluster = cluster_from_flags(a);
  if (a.has("oversubscribed")) {
    char* end = nullptr;
    const std::string v = a.get("oversubscribed");
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(x >= 1 && x <= 100))
      LOOM_USAGE("--oversubscribed must be a factor from 1 to 100, got '", v, "'");
    cluster.oversubscribed = x;
  }
  plan::Transformer m;
  plan::Parallel p;
  plan::EvalOptions eo;
  eo.precision = a.get("precision");
  eo.timeline = a.has("svg") || a.has("trace");
  eo.blocking_p2p = a.has("blocking-p2p");
  if (a.has("from-config")) {
    from_config(a, &m, &p, &eo.cut);
    apply_parallel_flags(a, p, true);
  } else {
    m = model_from_flags(a);
    apply_parallel_flags(a, p, false);
  }
  for (const std::string& v : flags::split_list(a.get("rank-speed"))) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (*end != '\0' || !(x > 0 && x < 1e6))
      LOOM_USAGE(
          "--rank-speed takes positive numbers separated by commas (one per pipeline "
          "rank), got '",
          v, "'");
    eo.rank_speed.push_back(x);
  }
  if (a.has("rank-speed") && eo.rank_speed.empty())
    LOOM_USAGE("--rank-speed needs one number per pipeline rank, e.g. --rank-speed 1.2,1");
  plan::Evaluation e = plan::evaluate(m, p, cluster, eo);
  if (a.has("json")) {
    std::cout << json_line(e);
  } else {
    std::cout << "loom simulate: " << cluster.name << " (" << cluster.origin << ")\n"
              << plan::format_breakdown(e);
  }
  if (a.has("svg")) {
    schedule::Schedule shown = e.lowered;
    shown.name = "simulated " + p.schedule;
    write_file(a.get("svg"), schedule::render_svg(shown, e.sim.timing(), " ms"), "svg");
  }
  if (a.has("trace")) write_file(a.get("trace"), plan::sim_trace_json(e.sim), "trace");
  return 0;
}

// The `loom train` command line that runs a candidate (model, batch and layout).
// The model as `loom train` flags: all of it, or (on a --from-config file) what the command
// line changed.
std::string model_flags(const plan::Transformer& m, const flags::Parsed& a) {
  const bool all = !a.has("from-config");
  std::ostringstream os;
  if (!a.get("from-config").empty()) os << " --config " << a.get("from-config");
  auto flag = [&](const char* name, const std::string& train_name, auto value) {
    if (all || a.has(name)) os << " --" << train_name << " " << value;
  };
  if (m.arch == plan::Arch::Llama) {
    if (all || a.has("model")) os << " --model.kind llama";
    if (m.kv_heads) flag("kv-heads", "kv-heads", m.kv_heads);
    if (m.ffn) flag("ffn-width", "ffn-width", m.ffn);
  } else if (a.has("model")) {
    os << " --model.kind gpt";
  }
  if (m.tied && (all || a.has("tie-embeddings"))) os << " --tie-embeddings";
  flag("layers", "layers", m.layers);
  flag("width", "width", m.hidden);
  flag("heads", "heads", m.heads);
  flag("seq-len", "seq-len", m.seq_len);
  flag("vocab", "vocab", m.vocab);
  return os.str();
}

// model: model_flags().
std::string train_command_line(const plan::Candidate& c, const std::string& model) {
  const plan::Parallel& p = c.par;
  std::ostringstream os;
  os << "loom train" << model;
  os << " --global-batch " << p.global_batch() << " --nproc " << p.gpus() << " --dp " << p.dp
     << " --pp " << p.pp << " --tp " << p.tp << " --loops " << p.loops << " --microbatches "
     << p.microbatches << " --schedule " << p.schedule << " --dp-mode "
     << config::name_of(p.dp_mode) << " --recompute " << config::name_of(p.recompute)
     << (p.sequence_parallel ? " --sequence-parallel" : "")
     << (p.attention == plan::Attention::Flash ? " --attention flash" : "");
  // GPU features loom's runtime does not have: say so rather than drop them silently.
  if (p.tp_comm_overlap || p.distributed_optimizer || p.megatron)
    os << "  # loom train has no tp overlap, distributed optimizer or bf16 parameters: the "
          "simulated run is Megatron-Core's";
  return os.str();
}

// on|off|both for a planner switch: the values to search (off when not given).
std::vector<bool> on_off_both(const flags::Parsed& a, const std::string& flag) {
  const std::string v = a.get(flag, "off");
  if (v == "on") return {true};
  if (v == "off") return {false};
  if (v == "both") return {false, true};
  LOOM_USAGE("--", flag, " must be on, off or both, got '", v, "'");
}

int plan_command(const std::vector<std::string>& args) {
  const flags::Parsed a =
      flags::parse(args, {"plan", with_model_flags({{"gpus", "64"},
                                                    {"global-batch", "512"},
                                                    {"top", "10"},
                                                    {"time-budget", "30s"},
                                                    {"memory-limit", "70GB"},
                                                    {"schedules", "1f1b,bfs"},
                                                    {"dp-modes", "allreduce,zero3"},
                                                    {"micro-batch-sizes", "1,2,4"},
                                                    {"loops", "1,2"},
                                                    {"recompute", "none,selective,full"},
                                                    {"attention", "standard,flash"},
                                                    {"tp-comm-overlap", "both"},
                                                    {"distributed-optimizer", "both"},
                                                    {"from-config", "configs/gpt-fortunes.toml"},
                                                    {"json", ""}})});
  if (a.help) {
    std::cout << kPlanHelp;
    return 0;
  }
  plan::Cluster cluster = cluster_from_flags(a);
  plan::PlanRequest req;
  int64_t file_batch = 0;
  if (a.has("from-config")) {
    const config::Config cfg = config_with_model_flags(a);
    req.model = plan::transformer_of(cfg.model);
    file_batch = cfg.train.global_batch;
  } else {
    req.model = model_from_flags(a);
  }
  if (!a.has("gpus") || (!a.has("global-batch") && !file_batch))
    LOOM_USAGE("loom plan needs --gpus N and --global-batch G (or --from-config FILE)");
  req.gpus = to_int("gpus", a.get("gpus"), 1, 1 << 24);
  req.global_batch = a.has("global-batch")
                         ? to_int64("global-batch", a.get("global-batch"), 1, int64_t(1) << 40)
                         : file_batch;
  req.precision = a.get("precision");
  req.time_budget_s = config::parse_duration(a.get("time-budget", "30s"));
  if (a.has("memory-limit")) {
    char* end = nullptr;
    const std::string v = a.get("memory-limit");
    double gb = std::strtod(v.c_str(), &end);
    if (v.empty() || (*end && std::string(end) != "GB") || !(gb > 0))
      LOOM_USAGE("--memory-limit must be a size in GB like 70 or 70GB, got '", v, "'");
    req.memory_limit = gb * 1e9;
  }
  for (const std::string& s : flags::split_list(a.get("schedules"))) {
    bool known_name = false;
    for (const std::string& g : schedule::generator_names()) known_name = known_name || g == s;
    if (!known_name)
      LOOM_USAGE("--schedules: unknown schedule '", s,
                 "'; known: gpipe, 1f1b, interleaved, bfs, zb-h1, zbv, dualpipev");
    req.schedules.push_back(s);
  }
  for (const std::string& s : flags::split_list(a.get("dp-modes"))) {
    req.dp_modes.push_back(plan::parse_dp_mode(s));
    plan::check_planned(req.dp_modes.back());
  }
  for (const std::string& s : flags::split_list(a.get("micro-batch-sizes")))
    req.micro_batches.push_back(to_int64("micro-batch-sizes", s, 1, 1 << 20));
  for (const std::string& s : flags::split_list(a.get("loops")))
    req.loops.push_back(to_int("loops", s, 1, 1024));
  if (a.has("recompute")) {
    req.recompute.clear();
    for (const std::string& s : flags::split_list(a.get("recompute")))
      req.recompute.push_back(plan::parse_recompute(s));
  }
  if (a.has("attention")) {
    req.attention.clear();
    for (const std::string& s : flags::split_list(a.get("attention")))
      req.attention.push_back(plan::parse_attention(s));
  }
  req.megatron = a.has("megatron");
  req.tp_comm_overlap = on_off_both(a, "tp-comm-overlap");
  req.distributed_optimizer = on_off_both(a, "distributed-optimizer");
  const bool overlap_asked = std::find(req.tp_comm_overlap.begin(), req.tp_comm_overlap.end(),
                                       true) != req.tp_comm_overlap.end();
  if (overlap_asked && cluster.tp_overlap <= 0)
    LOOM_USAGE("--tp-comm-overlap: cluster '", cluster.name, "' (", cluster.origin,
               ") has no efficiency.tp_overlap; add the share of a collective hidden there");
  const int top = to_int("top", a.get("top", "10"), 1, 100000);

  plan::PlanResult r = plan::plan(req, cluster);
  if (r.ranked.empty()) LOOM_USAGE(r.explanation);
  if (a.has("json")) {
    for (int i = 0; i < std::min<int>(top, static_cast<int>(r.ranked.size())); ++i) {
      const plan::Candidate& c = r.ranked[i];
      std::printf(
          "{\"rank\":%d,\"configuration\":\"%s\",\"step_s\":%.6g,\"tflops_per_device\":%.6g,"
          "\"model_tflops_per_device\":%.6g,\"bubble\":%.4g,\"exposed_comm_s\":%.6g,\"peak_bytes\":"
          "%.6g,\"dp\":%d,\"pp\":%d,"
          "\"tp\":%d,\"loops\":%d,\"m\":%d,\"b\":%lld,\"schedule\":\"%s\",\"dp_mode\":\"%s\","
          "\"recompute\":\"%s\",\"attention\":\"%s\",\"command\":\"%s\"}\n",
          i + 1, c.par.describe().c_str(), c.step_s, c.tflops_per_gpu, c.model_tflops_per_gpu,
          c.bubble, c.exposed_s, c.peak_bytes, c.par.dp, c.par.pp, c.par.tp, c.par.loops,
          c.par.microbatches, (long long)c.par.micro_batch, c.par.schedule.c_str(),
          config::name_of(c.par.dp_mode).c_str(), config::name_of(c.par.recompute).c_str(),
          plan::name_of(c.par.attention).c_str(),
          train_command_line(c, model_flags(req.model, a)).c_str());
    }
    return 0;
  }
  const plan::Transformer& m = req.model;
  std::string shape = detail::concat(m.arch == plan::Arch::Gpt ? "GPT" : "Llama", " l=", m.layers,
                                     " h=", m.hidden, " a=", m.heads);
  if (m.arch == plan::Arch::Llama)
    shape += detail::concat(" kv=", plan::kv_heads_of(m), " f=", int64_t(plan::ffn_width(m)));
  std::printf(
      "loom plan: %s s=%lld V=%lld%s on %d devices of %s, global batch %lld, memory limit "
      "%s\n\n",
      shape.c_str(), (long long)m.seq_len, (long long)m.vocab, m.tied ? " tied" : "", req.gpus,
      cluster.name.c_str(), (long long)req.global_batch, plan::human_bytes(r.memory_limit).c_str());
  std::cout << plan::format_table(r, top) << "\n" << r.explanation << "\n";
  if (!r.ranked.empty())
    std::cout << "\nthe best as a loom train command (--nproc: on one machine; or mpirun -n N):\n  "
              << train_command_line(r.ranked[0], model_flags(req.model, a)) << "\n";
  std::printf("(searched in %.1f s)\n", r.elapsed_s);
  return 0;
}

}  // namespace loom::cli
