// loom simulate: predicts one training step of one configuration (src/loom/plan/).
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "loom/cli/commands.h"
#include "loom/cli/plan_inputs.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/plan/evaluate.h"
#include "loom/schedule/io.h"

namespace loom::cli {
namespace {

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
        output freed once sent (loom keeps it until its backward), pipeline messages cut
        into 1/t slices that the receivers all-gather (loom: whole, or with
        --sequence-parallel the rank's part), and with --tie-embeddings on a pipeline a
        second parameter on the last stage whose gradient the first and last stage
        all-reduce (loom: an fp32 copy, no parameter, sent each step and its gradient
        sent back)]
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
        [--blocking-p2p: pipeline messages as Megatron-LM's 2021 code moves them: one
         batched exchange between compute steps, waited for at both ends; its interleaved
         schedule sends a forward's output after the backward that follows it]
        [--grad-reduce-after-flush: data-parallel gradients reduced after the last backward
         (Megatron-LM of 2021), not behind the backwards still running]
        [--oversubscribed X: a shared (CPU) cluster's slowdown beyond the fair share of the
         cores when ranks outnumber them (overrides the file's [node] oversubscribed; its
         runtime_cpu still multiplies it)]
        [--max-unsharded K (2)] [--no-reshard-after-forward]
        [--rank-speed S0,S1,..: compute-time multiplier per pipeline rank, e.g. 1.2,1 for
         a first rank 20% slower (a straggler, or the speeds measured during a run)]
        [--async-save: checkpoints written in the background (output.async_save, also
         read from --from-config): each rank holds a copy of its state meanwhile, in the
         peak on a shared (CPU) cluster, as host memory otherwise]
output: [--svg FILE] [--trace FILE] [--json: one line: the figures, and
         every pipeline rank's under "ranks"]

example:
  loom simulate --model gpt --layers 64 --width 8192 --heads 64 --seq-len 2048 \
    --cluster clusters/a100-80gb.toml --gpus 512 --pp 8 --tp 8 --loops 4 --schedule bfs \
    --global-batch 512 --micro-batch-size 1 --dp-mode zero3 --recompute full
)";

void write_file(const std::string& path, const std::string& text, const std::string& flag) {
  write_file_atomic(path, text, "pass a writable path to --" + flag);
  std::cerr << "wrote " << path << "\n";
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
     << ",\"rank0_snapshot_bytes\":" << r0.peak.snapshot
     << ",\"rank0_host_snapshot_bytes\":" << r0.host_snapshot
     << ",\"rank0_kept_activation_bytes\":" << r0.peak_kept
     << ",\"rank0_compute_s\":" << r0.compute_s << ",\"rank0_dp_bytes\":" << r0.dp_bytes
     << ",\"rank0_p2p_bytes\":" << r0.p2p_bytes << ",\"compute_source\":\"" << e.compute_source
     << "\",\"ranks\":[";
  // Every pipeline rank, as the text's table (a rank stands for its tp x dp copies).
  for (size_t q = 0; q < r.ranks.size(); ++q) {
    const plan::RankResult& rr = r.ranks[q];
    os << (q ? "," : "") << "{\"rank\":" << q << ",\"compute_s\":" << rr.compute_s
       << ",\"tp_comm_s\":" << rr.tp_comm_s
       << ",\"idle_s\":" << r.step_s - rr.compute_s - rr.optimizer_s
       << ",\"optimizer_s\":" << rr.optimizer_s << ",\"p2p_busy_s\":" << rr.p2p_s
       << ",\"dp_busy_s\":" << rr.dp_s << ",\"p2p_bytes\":" << rr.p2p_bytes
       << ",\"dp_bytes\":" << rr.dp_bytes << ",\"peak_bytes\":" << rr.peak.total()
       << ",\"params_bytes\":" << rr.peak.params << ",\"grads_bytes\":" << rr.peak.grads
       << ",\"optimizer_bytes\":" << rr.peak.optimizer
       << ",\"activation_bytes\":" << rr.peak.activations
       << ",\"working_bytes\":" << rr.peak.working << ",\"snapshot_bytes\":" << rr.peak.snapshot
       << ",\"host_snapshot_bytes\":" << rr.host_snapshot
       << ",\"kept_activation_bytes\":" << rr.peak_kept << ",\"in_flight\":" << rr.peak_inflight
       << "}";
  }
  os << "]}\n";
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
                                           {"grad-reduce-after-flush", ""},
                                           {"oversubscribed", "1.5"},
                                           {"max-unsharded", "2"},
                                           {"no-reshard-after-forward", ""},
                                           {"placement", "pipeline-inside"},
                                           {"rank-speed", "1.2,1"},
                                           {"async-save", ""},
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
  eo.grad_reduce_after_flush = a.has("grad-reduce-after-flush");
  if (a.has("from-config")) {
    from_config(a, &m, &p, &eo.cut);
    apply_parallel_flags(a, p, true);
    eo.async_save = config_with_model_flags(a).output.async_save;
  } else {
    m = model_from_flags(a);
    apply_parallel_flags(a, p, false);
  }
  // The simulation holds the whole lowered schedule: about 1 KB per stage and micro-batch.
  constexpr int64_t kMaxStageMicrobatches = int64_t(1) << 21;
  if (int64_t(p.pp) * p.loops * p.microbatches > kMaxStageMicrobatches)
    LOOM_USAGE("pp x loops x microbatches = ", int64_t(p.pp) * p.loops * p.microbatches,
               " is more than loom simulate holds (", kMaxStageMicrobatches,
               "); simulate fewer micro-batches (a larger --micro-batch-size, or --microbatches): ",
               "the time per micro-batch settles long before");
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
  eo.async_save = eo.async_save || a.has("async-save");
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

}  // namespace loom::cli
