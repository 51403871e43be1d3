#include "loom/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "loom/common/error.h"
#include "loom/plan/transformer_model.h"
#include "loom/schedule/generate.h"

namespace loom::plan {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// Closed-form makespan / ideal ratio (docs/schedules.md, Generators) for ordering the search.
double bubble_factor(const std::string& name, int p, int v, int m) {
  if (name == "bfs" || (name == "gpipe" && v > 1)) {
    if (m >= p) return double(v * m + p - 1) / (v * m);
    return double(p * v + m - 1) / (v * m);
  }
  if (name == "interleaved") return double(v * m + p - 1) / (v * m);
  if (name == "zb-h1") return (3.0 * m + p - 1) / (3.0 * m);
  if (name == "zbv") return std::max(6.0 * m + p - 1, 4.0 * m + 4 * p - 2) / (6.0 * m);
  if (name == "dualpipev") return (6.0 * m + p - 1) / (6.0 * m);
  return double(m + p - 1) / m;
}

// The values of a switch asked for that apply to a layout: one that does not apply reads as
// off (asked "on" only, a layout without tensor or data parallelism still gets its one run).
std::vector<bool> applicable(const std::vector<bool>& asked, bool applies) {
  std::vector<bool> out;
  for (bool v : asked)
    if (std::find(out.begin(), out.end(), v && applies) == out.end()) out.push_back(v && applies);
  return out;
}

// The recomputation, attention, overlap and optimizer variants of one layout, without
// duplicates (overlap only with tp > 1, the distributed optimizer only for zero1 with dp > 1).
std::vector<Parallel> variants(const Parallel& base, const PlanRequest& req) {
  std::vector<Parallel> out;
  for (Recompute rc : req.recompute)
    for (Attention at : req.attention) {
      // Flash already keeps no s² values: selective would recompute nothing more.
      if (at == Attention::Flash && rc == Recompute::Selective) continue;
      for (bool ov : applicable(req.tp_comm_overlap, base.tp > 1))
        for (bool dist :
             applicable(req.distributed_optimizer, base.dp_mode == DpMode::Zero1 && base.dp > 1)) {
          Parallel p = base;
          p.recompute = rc;
          p.attention = at;
          p.tp_comm_overlap = ov;
          p.distributed_optimizer = dist;
          out.push_back(p);
        }
    }
  return out;
}

struct Pending {
  Parallel par;
  double bound = 0;
};

}  // namespace

Candidate summarize(const Evaluation& e) {
  Candidate c;
  c.par = e.par;
  const SimResult& r = e.sim;
  c.step_s = r.step_s;
  c.ideal_step_s = r.ideal_step_s;
  c.bubble = r.bubble_fraction;
  c.exposed_s = r.exposed_comm_s;
  for (const RankResult& rr : r.ranks) {
    c.compute_s = std::max(c.compute_s, rr.compute_s - rr.tp_comm_s);
    c.tp_comm_s = std::max(c.tp_comm_s, rr.tp_comm_s);
    c.p2p_s = std::max(c.p2p_s, rr.p2p_s);
    c.dp_s = std::max(c.dp_s, rr.dp_s);
    c.optimizer_s = std::max(c.optimizer_s, rr.optimizer_s);
  }
  c.peak = r.ranks[r.peak_rank()].peak;
  c.peak_bytes = c.peak.total();
  c.tflops_per_gpu = e.tflops_per_gpu;
  c.mfu = e.mfu;
  c.model_tflops_per_gpu = e.model_tflops_per_gpu;
  c.model_mfu = e.model_mfu;
  return c;
}

PlanResult plan(const PlanRequest& req, const Cluster& c) {
  const auto t_start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  };
  if (req.gpus < 1) LOOM_USAGE("--gpus must be >= 1 (got ", req.gpus, ")");
  if (req.global_batch < 1) LOOM_USAGE("--global-batch must be >= 1 (got ", req.global_batch, ")");
  PlanResult out;
  out.memory_limit = req.memory_limit > 0 ? req.memory_limit : kDefaultMemoryShare * c.memory_bytes;
  const Transformer& m = req.model;
  std::vector<std::string> schedules =
      req.schedules.empty() ? schedule::generator_names() : req.schedules;
  std::vector<DpMode> modes =
      req.dp_modes.empty()
          ? std::vector<DpMode>{DpMode::AllReduce, DpMode::Zero1, DpMode::Zero2, DpMode::Zero3}
          : req.dp_modes;
  std::vector<int64_t> bs =
      req.micro_batches.empty() ? std::vector<int64_t>{1, 2, 4, 8} : req.micro_batches;
  std::vector<int> loops = req.loops.empty() ? std::vector<int>{1, 2, 4, 8} : req.loops;
  // By default zero3 without a pipeline also tries one layer per stage (gathered one by one).
  const bool zero3 = std::find(modes.begin(), modes.end(), DpMode::Zero3) != modes.end();
  std::vector<int> loops_at_pp1 = loops;
  if (req.loops.empty() && zero3 && m.layers <= 1024 &&
      std::find(loops.begin(), loops.end(), int(m.layers)) == loops.end())
    loops_at_pp1.push_back(static_cast<int>(m.layers));

  // One rank with one stage: zb-h1 runs 1F1B's order with each backward split in two (its W
  // right after its I), bfs GPipe's order; either is searched only without its twin.
  auto searched = [&](const char* name) {
    return std::find(schedules.begin(), schedules.end(), name) != schedules.end();
  };
  const bool zb_twin = searched("1f1b"), bfs_twin = searched("gpipe");
  std::vector<Pending> pending;
  for (int tp : divisors(req.gpus)) {
    if ((tp > c.devices_per_node && !c.shared) || !splits_over(m, tp)) continue;
    for (int pp : divisors(req.gpus / tp)) {
      if (pp > m.layers) continue;
      const int dp = req.gpus / tp / pp;
      if (req.global_batch % dp) continue;
      const int64_t replica = req.global_batch / dp;
      for (int64_t b : bs) {
        if (b < 1 || replica % b || replica / b > req.max_microbatches) continue;
        const int mb = static_cast<int>(replica / b);
        for (int v : pp == 1 ? loops_at_pp1 : loops) {
          if (pp * v > m.layers || (v > 1 && m.layers % (pp * v))) continue;
          for (const std::string& name : schedules) {
            if ((name == "interleaved" && v == 1) || (name == "gpipe" && v > 1)) continue;
            if (pp == 1 && v == 1 && ((name == "zb-h1" && zb_twin) || (name == "bfs" && bfs_twin)))
              continue;
            if (!schedule::unsupported_reason(name, {pp, v, mb}).empty()) continue;
            for (DpMode mode : modes) {
              if (dp == 1 && mode != DpMode::AllReduce) continue;
              // Loops without a pipeline only pay off under zero3: each stage's parameters
              // are gathered apart (FSDP's per-layer granularity at one layer per stage).
              if (pp == 1 && v > 1 && mode != DpMode::Zero3) continue;
              Parallel base;
              base.dp = dp;
              base.pp = pp;
              base.tp = tp;
              base.loops = v;
              base.microbatches = mb;
              base.micro_batch = b;
              base.schedule = name;
              base.dp_mode = mode;
              base.sequence_parallel = tp > 1;
              base.megatron = req.megatron;
              for (const Parallel& par : variants(base, req)) {
                ++out.enumerated;
                // Cheap bound: slowest rank's compute times the closed-form bubble; memory of
                // the static state plus one micro-batch of activations.
                TransformerCostModel cost(m, par, c, req.precision);
                double work = 0, static_mem = 0;
                for (int r = 0; r < pp; ++r) {
                  double w = 0, sm = 0, act = 0;
                  for (int s : par.shape().stages_of(r)) {
                    w +=
                        cost.compute_s(s, schedule::Kind::F) + cost.compute_s(s, schedule::Kind::B);
                    const StageMemory sm_s = cost.memory(s);
                    sm += sm_s.params + sm_s.grads + sm_s.optimizer;
                    if (req.async_save && c.shared) sm += sm_s.saved;
                    act = std::max(act, sm_s.activation);
                  }
                  work = std::max(work, w * mb);
                  static_mem = std::max(static_mem, sm + act);
                }
                if (static_mem > out.memory_limit) {
                  ++out.dropped_bound;
                  continue;
                }
                pending.push_back({par, work * bubble_factor(name, pp, v, mb)});
              }
            }
          }
        }
      }
    }
  }
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Pending& a, const Pending& b) { return a.bound < b.bound; });
  for (const Pending& p : pending) {
    if (elapsed() > req.time_budget_s) {
      ++out.skipped_budget;
      continue;
    }
    EvalOptions eo;
    eo.precision = req.precision;
    eo.async_save = req.async_save;
    Candidate cand = summarize(evaluate(m, p.par, c, eo));
    cand.bound_s = p.bound;
    ++out.simulated;
    if (cand.peak_bytes > out.memory_limit) {
      ++out.over_memory;
      continue;
    }
    out.ranked.push_back(cand);
  }
  std::stable_sort(
      out.ranked.begin(), out.ranked.end(), [](const Candidate& a, const Candidate& b) {
        return a.step_s != b.step_s ? a.step_s < b.step_s : a.peak_bytes < b.peak_bytes;
      });
  out.elapsed_s = elapsed();
  out.explanation = explain(out);
  return out;
}

namespace {

// One or two sentences: how `u` compares with the winner `w`, and where most of the gap is
// (compute of the busiest rank, pipeline idle with free communication, exposed communication).
std::string compare(const Candidate& w, const Candidate& u, const char* who) {
  char buf[1024];
  const double gap = u.step_s / w.step_s - 1;
  if (gap < 0.005) {
    const std::string up = human_bytes(u.peak_bytes), wp = human_bytes(w.peak_bytes);
    const std::string peaks =
        up == wp ? "and peaks the same (" + up + ")"
                 : std::string(u.peak_bytes > w.peak_bytes
                                   ? "and peaks higher ("
                                   : "and peaks lower: prefer it when memory headroom matters (") +
                       up + " vs " + wp + ")";
    std::snprintf(buf, sizeof buf, "%s, %s, is as fast (%s, within 0.5%%) %s. ", who,
                  u.par.describe().c_str(), human_seconds(u.step_s).c_str(), peaks.c_str());
    return buf;
  }
  std::string out;
  std::snprintf(buf, sizeof buf,
                "%s, %s, takes %s (%.1f%% longer): pipeline bubble %.1f%% of the compute span vs "
                "the winner's %.1f%%, exposed communication %s vs %s, busiest rank's compute %s "
                "vs %s. ",
                who, u.par.describe().c_str(), human_seconds(u.step_s).c_str(), 100 * gap,
                100 * u.bubble, 100 * w.bubble, human_seconds(u.exposed_s).c_str(),
                human_seconds(w.exposed_s).c_str(), human_seconds(u.compute_s).c_str(),
                human_seconds(w.compute_s).c_str());
  out += buf;
  const double dc = u.compute_s - w.compute_s;
  // The ranks' idle time with communication free (the bubble's share of that step).
  const double db = u.bubble * u.ideal_step_s - w.bubble * w.ideal_step_s;
  const double de = u.exposed_s - w.exposed_s;
  const double big = std::max({dc, db, de});
  std::string why = big == db   ? "the winner's smaller pipeline bubble"
                    : big == de ? "the winner's less exposed communication"
                                : "the winner's lighter compute";
  if (big == dc && u.par.recompute > w.par.recompute)
    why += " (it recomputes fewer activations)";
  else if (big == dc && w.par.micro_batch > u.par.micro_batch)
    why += " (larger micro-batches run closer to peak)";
  else if (big == dc && w.par.tp < u.par.tp)
    why += " (less tensor parallelism: larger matrix products, fewer all-reduces)";
  std::snprintf(buf, sizeof buf, "Most of that gap, %s, is %s. ", human_seconds(big).c_str(),
                why.c_str());
  return out + buf;
}

}  // namespace

std::string explain(const PlanResult& r) {
  if (r.ranked.empty() && r.skipped_budget > 0)
    return detail::concat("No configuration that fits in ", human_bytes(r.memory_limit),
                          " per device was found within the time budget (", r.enumerated,
                          " built, ", r.simulated, " simulated, ", r.over_memory,
                          " of them over memory, ", r.skipped_budget,
                          " not simulated); raise --time-budget.");
  if (r.ranked.empty())
    return detail::concat(
        "No configuration fits in ", human_bytes(r.memory_limit), " per device (", r.enumerated,
        " built, ", r.dropped_bound + r.over_memory,
        " over memory); add devices, allow recomputation and zero3, or lower the global batch.");
  const Candidate& w = r.ranked[0];
  char buf[1024];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "%s wins with %s per step (%.4g TFLOP/s per device of model FLOPs, %.0f%% MFU). ",
                w.par.describe().c_str(), human_seconds(w.step_s).c_str(), w.model_tflops_per_gpu,
                100 * w.model_mfu);
  out += buf;
  if (r.ranked.size() > 1) out += compare(w, r.ranked[1], "The runner-up");
  // The runner-up often differs only in the dp-mode; also compare with another schedule.
  for (size_t i = 1; i < r.ranked.size(); ++i)
    if (r.ranked[i].par.schedule != w.par.schedule) {
      if (i > 1) out += compare(w, r.ranked[i], ("The best " + r.ranked[i].par.schedule).c_str());
      break;
    }
  std::snprintf(buf, sizeof buf,
                "The winner peaks at %s of the %s limit per device (%.0f%% headroom). %d "
                "configurations built, %d simulated, %d over memory",
                human_bytes(w.peak_bytes).c_str(), human_bytes(r.memory_limit).c_str(),
                100 * (1 - w.peak_bytes / r.memory_limit), r.enumerated, r.simulated,
                r.dropped_bound + r.over_memory);
  out += buf;
  if (r.skipped_budget)
    out += detail::concat(", ", r.skipped_budget,
                          " not simulated within the time budget (lowest bounds first)");
  out += ".";
  return out;
}

std::string format_table(const PlanResult& r, int top) {
  const int shown = std::min<int>(top, static_cast<int>(r.ranked.size()));
  // The configuration column is as wide as the longest one shown (layouts with loops,
  // recomputation and sequence parallelism run past 60 characters).
  int width = static_cast<int>(std::string("configuration").size());
  for (int i = 0; i < shown; ++i)
    width = std::max(width, static_cast<int>(r.ranked[i].par.describe().size()));
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-4s %-*s %-10s %-6s %-8s %-10s %-10s %-9s %s\n", "#", width,
                "configuration", "step", "MFU", "bubble", "exposed", "compute", "memory",
                "activations");
  out += buf;
  for (int i = 0; i < shown; ++i) {
    const Candidate& c = r.ranked[i];
    std::snprintf(buf, sizeof buf, "%-4d %-*s %-10s %-6s %-8s %-10s %-10s %-9s %s\n", i + 1, width,
                  c.par.describe().c_str(), human_seconds(c.step_s).c_str(),
                  (std::to_string(int(std::lround(100 * c.model_mfu))) + "%").c_str(),
                  (std::to_string(int(std::lround(1000 * c.bubble)) / 10) + "." +
                   std::to_string(int(std::lround(1000 * c.bubble)) % 10) + "%")
                      .c_str(),
                  human_seconds(c.exposed_s).c_str(), human_seconds(c.compute_s).c_str(),
                  human_bytes(c.peak_bytes).c_str(), human_bytes(c.peak.activations).c_str());
    out += buf;
  }
  return out;
}

}  // namespace loom::plan
