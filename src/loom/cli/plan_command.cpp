// loom plan: searches the layouts of a model on a cluster and ranks those that fit
// (src/loom/plan/planner.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "loom/cli/commands.h"
#include "loom/cli/plan_inputs.h"
#include "loom/common/error.h"
#include "loom/plan/planner.h"
#include "loom/schedule/generate.h"

namespace loom::cli {
namespace {

using flags::to_int;
using flags::to_int64;

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
         --async-save (checkpoints in the background, as the file's output.async_save:
         a copy of each rank's state counts in the memory of a shared (CPU) cluster)
         --json (one line per ranked configuration)
Exits 2 with one line when no configuration fits.

example:
  loom plan --model gpt --layers 64 --width 8192 --heads 64 --seq-len 2048 \
    --cluster clusters/a100-80gb.toml --gpus 256 --global-batch 256 --top 10
)";

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

}  // namespace

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
                                                    {"async-save", ""},
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
    req.async_save = cfg.output.async_save;
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
  if (!(req.time_budget_s > 0))
    LOOM_USAGE("--time-budget must be more than 0, got '", a.get("time-budget"), "'; e.g. 30s");
  if (a.has("memory-limit")) {
    char* end = nullptr;
    const std::string v = a.get("memory-limit");
    double gb = std::strtod(v.c_str(), &end);
    if (v.empty() || (*end && std::string(end) != "GB") || !(gb > 0))
      LOOM_USAGE("--memory-limit must be a size in GB like 70 or 70GB, got '", v, "'");
    req.memory_limit = gb * 1e9;
  }
  for (const char* list :
       {"schedules", "dp-modes", "micro-batch-sizes", "loops", "recompute", "attention"})
    if (a.has(list) && flags::split_list(a.get(list)).empty())
      LOOM_USAGE("--", list, " names nothing ('", a.get(list),
                 "'); give one or more, separated by commas, or leave it out");
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
  req.async_save = req.async_save || a.has("async-save");
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
