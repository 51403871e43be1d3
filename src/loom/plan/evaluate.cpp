#include "loom/plan/evaluate.h"

#include <cstdio>

#include "loom/common/error.h"
#include "loom/plan/blocking_exchanges.h"
#include "loom/plan/transformer_model.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"

namespace loom::plan {

Evaluation evaluate(const Transformer& m, const Parallel& p, const Cluster& c,
                    const EvalOptions& o) {
  Evaluation e;
  e.par = p;
  TransformerCostModel cost(m, p, c, o.precision, o.cut);
  if (!o.rank_speed.empty() && static_cast<int>(o.rank_speed.size()) != p.pp)
    LOOM_USAGE("rank speeds: ", o.rank_speed.size(), " given for ", p.pp,
               " pipeline ranks; give one per pipeline rank");
  for (double v : o.rank_speed)
    if (!(v > 0 && v < 1e6)) LOOM_USAGE("rank speeds must be positive factors, got ", v);
  RankSpeedModel scaled(cost, o.rank_speed, p.shape());
  const CostModel& used = o.rank_speed.empty() ? static_cast<const CostModel&>(cost) : scaled;
  schedule::LowerOptions lo;
  lo.dp_mode = lowering_mode(p.dp_mode, p.dp);
  lo.reshard_after_forward = p.reshard_after_forward;
  lo.max_unsharded = p.max_unsharded;
  e.lowered = schedule::lower(schedule::generate(p.schedule, p.shape()), lo);
  SimOptions so;
  so.mesh = p.mesh();
  so.dp_mode = p.dp_mode;
  so.timeline = o.timeline;
  so.blocking_p2p = o.blocking_p2p;
  so.grad_reduce_after_flush = o.grad_reduce_after_flush;
  if (o.async_save)
    so.async_save = c.shared ? SimOptions::Snapshot::Device : SimOptions::Snapshot::Host;
  // Megatron-LM's interleaved schedule exchanges once per forward-backward pair.
  if (o.blocking_p2p) e.lowered = blocking_exchanges(e.lowered, p.schedule == "interleaved");
  // Megatron-Core's buckets hold 40M parameters (ddp_bucket_size's default).
  if (p.distributed_optimizer) so.param_gather_bucket_bytes = 40e6 * cost.precision().param;
  e.sim = simulate(e.lowered, used, so);
  e.step_flops = cost.step_flops();
  e.tflops_per_gpu = e.sim.step_s > 0 ? e.step_flops / e.sim.step_s / p.gpus() / 1e12 : 0;
  e.mfu = e.tflops_per_gpu * 1e12 / cost.peak_flops();
  e.model_tflops_per_gpu = e.sim.step_s > 0 ? iteration_flops(m, double(p.global_batch()), false) /
                                                  e.sim.step_s / p.gpus() / 1e12
                                            : 0;
  e.model_mfu = e.model_tflops_per_gpu * 1e12 / cost.peak_flops();
  e.memory_limit = c.memory_bytes;
  e.compute_source = cost.compute_source();
  e.shared_cores = cost.shared_cores();
  for (int s = 0; s < cost.stages(); ++s)
    e.loaded_slowdown = std::max(e.loaded_slowdown, cost.loaded_slowdown(s));
  if (e.shared_cores > 0 && p.gpus() > e.shared_cores) {
    e.oversubscribed = cost.oversubscribed();
    e.runtime_cpu = c.runtime_cpu;
  }
  return e;
}

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.1f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  else if (b >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

std::string human_seconds(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  return buf;
}

std::string format_breakdown(const Evaluation& e) {
  const SimResult& r = e.sim;
  const Parallel& p = e.par;
  double busy = 0, tp = 0, p2p = 0, dp = 0, opt = 0;
  for (const RankResult& rr : r.ranks) {
    busy = std::max(busy, rr.compute_s);
    tp = std::max(tp, rr.tp_comm_s);
    p2p = std::max(p2p, rr.p2p_s);
    dp = std::max(dp, rr.dp_s);
    opt = std::max(opt, rr.optimizer_s);
  }
  const int pr = r.peak_rank();
  const MemoryBreakdown& pk = r.ranks[pr].peak;
  std::string out;
  char line[512];
  auto add = [&](const char* key, const std::string& value) {
    std::snprintf(line, sizeof line, "  %-16s %s\n", key, value.c_str());
    out += line;
  };
  add("configuration", detail::concat(p.describe(), " (", p.gpus(), " devices, global batch ",
                                      p.global_batch(), ")"));
  std::string sharing;
  if (e.shared_cores > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "; %d rank(s) share %d core(s), up to x%.2f slower while all compute", p.gpus(),
                  e.shared_cores, e.loaded_slowdown);
    sharing = buf;
    if (e.oversubscribed > 1) {
      std::snprintf(buf, sizeof buf, ", x%.2f beyond a fair share of the cores", e.oversubscribed);
      sharing += buf;
      if (e.runtime_cpu > 1) {
        std::snprintf(buf, sizeof buf, " (x%.2f of it the runtime's own CPU)", e.runtime_cpu);
        sharing += buf;
      }
    }
  }
  add("compute costs", e.compute_source + sharing);
  std::snprintf(line, sizeof line, "%s (%.4g samples/s)", human_seconds(r.step_s).c_str(),
                e.samples_per_s());
  add("step time", line);
  const bool tera = e.model_tflops_per_gpu >= 1;
  const char* unit = tera ? "TFLOP/s" : "GFLOP/s";
  const double scale = tera ? 1 : 1e3;
  std::snprintf(line, sizeof line, "%.4g %s per device of model FLOPs, %.1f%% of peak (MFU)",
                e.model_tflops_per_gpu * scale, unit, 100 * e.model_mfu);
  add("throughput", line);
  if (p.recompute == Recompute::Full) {
    std::snprintf(line, sizeof line, "%.4g %s per device, %.1f%% of peak (Megatron-LM's count)",
                  e.tflops_per_gpu * scale, unit, 100 * e.mfu);
    add("with recompute", line);
  }
  add("compute", human_seconds(busy) + " on the busiest rank" +
                     (tp > 0 ? ", of which tensor-parallel comm " + human_seconds(tp) : ""));
  std::snprintf(line, sizeof line, "%.1f%% of the compute span (step with free comm %s)",
                100 * r.bubble_fraction, human_seconds(r.ideal_step_s).c_str());
  add("pipeline bubble", line);
  add("exposed comm", human_seconds(r.exposed_comm_s) + " (busy per rank: p2p " +
                          human_seconds(p2p) + ", data-parallel " + human_seconds(dp) + ")");
  add("optimizer", human_seconds(opt));
  std::snprintf(line, sizeof line,
                "%s of %s on rank %d: params %s, grads %s, optimizer %s, "
                "activations %s kept (%d stage-loads in flight) + %s working",
                human_bytes(pk.total()).c_str(), human_bytes(e.memory_limit).c_str(), pr,
                human_bytes(pk.params).c_str(), human_bytes(pk.grads).c_str(),
                human_bytes(pk.optimizer).c_str(), human_bytes(pk.activations).c_str(),
                r.ranks[pr].peak_inflight, human_bytes(pk.working).c_str());
  std::string peak = line;
  if (pk.snapshot > 0) peak += " + " + human_bytes(pk.snapshot) + " an async save's copy";
  add("peak memory", peak);
  double host = 0;
  for (const RankResult& rr : r.ranks) host = std::max(host, rr.host_snapshot);
  if (host > 0)
    add("host memory",
        human_bytes(host) +
            " a rank at most: an async save's copy of its state (output.async_save)");
  if (!e.fits())
    out +=
        "  WARNING: over the device memory; use recomputation, zero3, more pp or fewer "
        "micro-batches in flight\n";
  out +=
      "\n  rank  compute    idle       p2p busy   dp busy    peak mem   activations  in flight\n";
  for (size_t q = 0; q < r.ranks.size(); ++q) {
    const RankResult& rr = r.ranks[q];
    std::snprintf(line, sizeof line, "  %-5zu %-10s %-10s %-10s %-10s %-10s %-12s %d\n", q,
                  human_seconds(rr.compute_s).c_str(),
                  human_seconds(r.step_s - rr.compute_s - rr.optimizer_s).c_str(),
                  human_seconds(rr.p2p_s).c_str(), human_seconds(rr.dp_s).c_str(),
                  human_bytes(rr.peak.total()).c_str(), human_bytes(rr.peak.activations).c_str(),
                  rr.peak_inflight);
    out += line;
  }
  return out;
}

}  // namespace loom::plan
