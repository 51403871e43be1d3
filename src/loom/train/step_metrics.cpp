#include "loom/train/step_metrics.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/log.h"
#include "loom/parallel/data_parallel.h"
#include "loom/train/checkpoint.h"
#include "loom/train/data_feed.h"
#include "loom/train/evaluator.h"
#include "loom/train/preflight.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The summary's numbers per rank: state bytes, peak bytes (loom's accounting), bytes sent
// (dp + pp), the allocator's peak bytes.
constexpr int kPerRank = 4;

void ExposedDpWait::start() {
  for (auto& [s, y] : syncs_) y->reset_exposed();
}

double ExposedDpWait::stop() {
  double s = 0;
  for (auto& [st, y] : syncs_) s += y->exposed_wait_s();
  return s;
}

// A resumed run continues the metrics of the checkpoint's step: the lines of later steps (the
// interrupted run went on past its last checkpoint) and that run's summary go, so that every
// step appears once. A line that is not JSON (damaged on disk) goes too, counted.
std::string steps_up_to(const std::string& lines, int64_t step, MetricsHistory* history) {
  std::istringstream in(lines);
  std::string kept, line;
  const std::regex step_re("^\\{\"step\": ?([0-9]+)");
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (!nlohmann::json::accept(line)) {
      if (history) ++history->damaged;
      continue;
    }
    std::smatch m;
    if (!std::regex_search(line, m, step_re)) continue;
    const int64_t s = std::stoll(m[1].str());
    if (s > step) continue;
    kept += line + "\n";
    if (history && line.find("\"loss\"") != std::string::npos)
      history->last_step = std::max(history->last_step, s);
  }
  return kept;
}

// Where a resumed run's own metrics.jsonl lost lines (a file removed or damaged on disk), one
// warning says which: the run goes on, its history has the hole. `own`: the checkpoint is of
// this run folder (one resumed from another run's folder starts its metrics at its step).
static void keep_steps_up_to(const fs::path& path, int64_t step, bool own) {
  std::error_code ec;
  const bool there = fs::exists(path, ec);
  MetricsHistory h;
  if (there) write_file_atomic(path.string(), steps_up_to(read_file(path.string()), step, &h));
  std::string lost;
  if (h.damaged > 0)
    lost = detail::concat(h.damaged, h.damaged == 1 ? " line that is" : " lines that are",
                          " not JSON (damaged) removed");
  if (own && h.last_step < step)
    lost +=
        detail::concat(lost.empty() ? "" : "; ",
                       !there ? "it is missing" : detail::concat("its last step is ", h.last_step),
                       ": the lines of steps ", h.last_step + 1, " to ", step, " are lost");
  if (!lost.empty())
    log::warn(detail::concat("resuming at step ", step, ", ", path.string(), ": ", lost,
                             "; it goes on from step ", step + 1));
}

RunMetrics::RunMetrics(const config::Config& cfg, comm::Backend& world, comm::Backend& dp_comm,
                       comm::Backend& pp_comm, int64_t start_step)
    : cfg_(cfg),
      world_(world),
      dp_comm_(dp_comm),
      pp_comm_(pp_comm),
      start_step_(start_step),
      root_(world.rank() == 0),
      gpt_(config::is_transformer(cfg.model.kind)) {
  items_per_step_ = double(cfg.train.global_batch) * (gpt_ ? cfg.model.seq_len : 1);
  if (root_) {
    fs::create_directories(cfg.output.dir);
    write_file_atomic((fs::path(cfg.output.dir) / "config.toml").string(), config::to_toml(cfg));
    const fs::path path = fs::path(cfg.output.dir) / "metrics.jsonl";
    if (start_step > 0) keep_steps_up_to(path, start_step, resumes_own_folder(cfg.output));
    file_ = std::make_unique<LineFile>(path.string(), /*truncate=*/start_step == 0);
    // A resumed run's plot starts with the steps before its checkpoint; a new run's replaces
    // any earlier one at its first evaluation, so none is left over until then.
    if (start_step > 0) curves_ = read_loss_curves(path.string());
    std::error_code ec;
    if (start_step == 0) fs::remove(fs::path(cfg.output.dir) / "loss.svg", ec);
    // On text, the bytes a token of the evaluated split stands for.
    eval_bytes_per_token_ = open_dataset(cfg, data::Split::Test)->bytes_per_token();
  }
  progress_ = std::make_unique<Progress>(cfg.train.steps, root_ && cfg.output.progress,
                                         gpt_ ? "tokens" : "samples");
  dp0_ = dp_comm.stats();
  pp0_ = pp_comm.stats();
  t_run_ = Clock::now();
}

void RunMetrics::message(const std::string& line) {
  if (root_) progress_->message(line);
}

// A line that cannot be written stops the run: its metrics would have a hole.
void RunMetrics::write(const std::string& line) {
  try {
    file_->append(line);
  } catch (const Error& e) {
    throw Error(detail::concat(e.what(), "; the run stops, metrics.jsonl keeps the lines before"));
  }
}

void RunMetrics::step(const StepSample& s, TrainResult* res) {
  // Measured bubble: the share of the step that an average rank did not spend computing. And
  // the CPU the world's ranks used in the step: all of it, and in F/B/I/W (one all-reduce).
  double sums[3] = {s.compute_s, s.cpu_s, s.compute_cpu_s};
  world_.all_reduce(sums, 3, comm::DType::Float64)->wait();
  const double bubble = 1.0 - sums[0] / world_.size() / s.step_s;
  const double dp_hidden = std::max(0.0, s.dp.busy_s - s.dp_exposed_s);
  steps_time_ += s.step_s;
  compute_s_ += s.compute_s;
  p2p_s_ += s.p2p_wait_s;
  dp_exposed_s_ += s.dp_exposed_s;
  dp_hidden_s_ += dp_hidden;
  dp_steps_ += s.dp;
  peak_act_ = std::max(peak_act_, s.peak_activation_bytes);
  peak_working_ = std::max(peak_working_, s.peak_working_bytes);
  peak_transient_ = std::max(peak_transient_, s.peak_transient_bytes);
  peak_allocated_ = std::max(peak_allocated_, s.peak_bytes);
  res->final_loss = s.loss;
  ++res->steps;
  if (root_) curves_.train.push_back({s.step, s.loss});
  res->dp_last_step = s.dp;
  res->tp_last_step = s.tp;
  for (auto& [k, v] : s.sync_metrics) res->sync_metrics[k] = v;
  if (root_) {
    JsonLine j;
    j.integer("step", s.step)
        .num("loss", s.loss)
        .num("lr", s.lr)
        .num("step_s", s.step_s)
        .num(gpt_ ? "tokens_per_s" : "samples_per_s", items_per_step_ / s.step_s)
        .num("compute_s", s.compute_s)
        .num("bubble", bubble)
        .num("world_cpu_s", sums[1])
        .num("world_compute_cpu_s", sums[2])
        .num("p2p_wait_s", s.p2p_wait_s)
        .num("dp_wait_s", s.dp_exposed_s)
        .integer("dp_bytes", (dp_comm_.stats() - dp0_).total_bytes())
        .integer("dp_step_calls", s.dp.total_calls())
        .integer("dp_step_bytes", s.dp.total_bytes())
        .num("dp_exposed_s", s.dp_exposed_s)
        .num("dp_hidden_s", dp_hidden)
        .integer("pp_bytes", (pp_comm_.stats() - pp0_).total_bytes())
        .integer("peak_activation_bytes", s.peak_activation_bytes)
        .integer("peak_dp_working_bytes", s.peak_working_bytes)
        .integer("peak_bytes", s.peak_bytes);
    if (cfg_.train.clip > 0) j.num("grad_norm", s.grad_norm);
    if (cfg_.parallel.tp > 1) j.integer("tp_step_bytes", s.tp.total_bytes());
    if (s.skipped) j.integer("skipped", 1);
    for (auto& [k, v] : s.sync_metrics) j.num(k, v);
    write(j.done());
  }
  if (s.skipped) {
    ++res->skipped_steps;
    message(detail::concat("step ", s.step, " skipped: the loss is ", s.loss,
                           " and the gradient norm ", s.grad_norm, " (train.on_nan = skip)"));
  }
  progress_->update(s.step, s.loss, items_per_step_ / s.step_s, seconds_since(t_run_));
}

void RunMetrics::calibration(int64_t step, int64_t micro_batch, const std::vector<double>& alone,
                             const std::vector<double>& loaded) {
  if (!root_) return;
  JsonLine j;
  j.integer("step", step).integer("calib_micro_batch", micro_batch);
  for (int q = 0; q < world_.size(); ++q)
    j.num("calib_layer_s_r" + std::to_string(q), alone[q])
        .num("calib_loaded_s_r" + std::to_string(q), loaded[q]);
  write(j.done());
}

void RunMetrics::eval(int64_t step, const EvalResult& result, TrainResult* res) {
  const double loss = result.loss, accuracy = result.accuracy;
  res->eval_loss = loss;
  res->eval_accuracy = accuracy;
  if (!root_) return;
  LastEval& e = last_eval_;
  e = {step, result.samples, loss, accuracy};
  if (gpt_) e.perplexity = std::exp(loss);
  // Bits per byte: the loss per token in bits, spread over the bytes a token stands for, so
  // that byte-level and tokenized runs compare.
  if (gpt_ && eval_bytes_per_token_ > 0)
    e.bits_per_byte = loss / std::log(2.0) / eval_bytes_per_token_;
  JsonLine j;
  j.integer("step", step).num("eval_loss", loss).integer("eval_samples", e.samples);
  if (accuracy >= 0) j.num("eval_accuracy", accuracy);
  if (gpt_) j.num("eval_perplexity", e.perplexity);
  if (std::isfinite(e.bits_per_byte)) j.num("eval_bits_per_byte", e.bits_per_byte);
  write(j.done());
  std::string what =
      detail::concat("eval at step ", step, " (", e.samples, " samples): loss ", loss);
  if (accuracy >= 0) what += detail::concat(", accuracy ", accuracy * 100, "%");
  if (gpt_) what += detail::concat(", perplexity ", e.perplexity);
  if (std::isfinite(e.bits_per_byte)) what += detail::concat(", ", e.bits_per_byte, " bits/byte");
  progress_->message(what);
  curves_.eval.push_back({step, loss});
  write_plot();
}

// The plot is a view of metrics.jsonl: a failure to write it (a full disk) is a warning, once,
// not the end of the run.
void RunMetrics::write_plot() {
  const std::string title = detail::concat(cfg_.output.dir, ": ", cfg_.model.kind, " loss");
  try {
    write_file_atomic((fs::path(cfg_.output.dir) / "loss.svg").string(), loss_svg(curves_, title));
  } catch (const Error& e) {
    if (!plot_failed_) message(detail::concat("warning: loss.svg not written: ", e.what()));
    plot_failed_ = true;
  }
}

void RunMetrics::end_steps(TrainResult* res) {
  progress_->finish();
  res->wall_s = seconds_since(t_run_);
  res->items_per_s = res->steps > 0 ? items_per_step_ * res->steps / steps_time_ : 0;
}

void RunMetrics::summarize(const parallel::MemoryBytes& mem, TrainResult* res) {
  // The run's bytes, the final gathering of the parameters (ZeRO-3) included.
  res->dp_bytes = (dp_comm_.stats() - dp0_).total_bytes();
  res->pp_bytes = (pp_comm_.stats() - pp0_).total_bytes();
  res->memory = mem;
  const int64_t persistent = mem.total() - mem.working;
  res->peak_working_bytes = peak_working_;
  res->peak_activation_bytes = peak_act_;
  res->peak_bytes = persistent + peak_transient_;
  // Every rank's state (persistent + transient buffers at their concurrent peak), peak of
  // state + activations, and bytes sent on its data-parallel and pipeline communicators.
  int64_t mine[kPerRank] = {persistent + peak_working_, res->peak_bytes,
                            static_cast<int64_t>(res->dp_bytes + res->pp_bytes), peak_allocated_};
  std::vector<int64_t> per_rank(kPerRank * world_.size());
  world_.all_gather(mine, per_rank.data(), kPerRank, comm::DType::Int64)->wait();
  const double nsteps = std::max<int64_t>(1, res->steps);
  if (!root_) return;
  write_plot();
  summary_line(*res, per_rank, nsteps);
  summary_table(*res, per_rank, nsteps);
}

void RunMetrics::summary_line(const TrainResult& res, const std::vector<int64_t>& per_rank,
                              double nsteps) {
  JsonLine j;
  j.str("summary", "run")
      .integer("steps", res.steps)
      .num("dp_calls_per_step", dp_steps_.total_calls() / nsteps)
      .integer("dp_bytes_per_step", static_cast<long long>(dp_steps_.total_bytes() / nsteps))
      // Everything this rank sent, evaluations and the final gather of parameters included.
      .integer("dp_bytes", static_cast<long long>(res.dp_bytes))
      .integer("pp_bytes", static_cast<long long>(res.pp_bytes))
      .num("dp_exposed_s", dp_exposed_s_)
      .num("dp_hidden_s", dp_hidden_s_)
      .num("p2p_wait_s", p2p_s_)
      .num("step_s", steps_time_ / nsteps);
  if (last_eval_.step >= 0) {
    j.integer("eval_step", last_eval_.step)
        .integer("eval_samples", last_eval_.samples)
        .num("eval_loss", last_eval_.loss);
    if (last_eval_.accuracy >= 0) j.num("eval_accuracy", last_eval_.accuracy);
    if (gpt_) j.num("eval_perplexity", last_eval_.perplexity);
    if (std::isfinite(last_eval_.bits_per_byte))
      j.num("eval_bits_per_byte", last_eval_.bits_per_byte);
  }
  for (int q = 0; q < world_.size(); ++q)
    j.integer("state_bytes_r" + std::to_string(q), per_rank[kPerRank * q])
        .integer("peak_bytes_r" + std::to_string(q), per_rank[kPerRank * q + 1])
        .integer("sent_bytes_r" + std::to_string(q), per_rank[kPerRank * q + 2])
        .integer("allocated_peak_bytes_r" + std::to_string(q), per_rank[kPerRank * q + 3]);
  write(j.done());
}

// Rank 0 shows its own accounting; the metrics file has per-step numbers.
void RunMetrics::summary_table(const TrainResult& res, const std::vector<int64_t>& per_rank,
                               double nsteps) {
  if (!cfg_.output.progress) return;
  const double bubble = steps_time_ > 0 ? std::max(0.0, 1.0 - compute_s_ / steps_time_) : 0;
  const double exposed_s = p2p_s_ + dp_exposed_s_;
  const parallel::MemoryBytes& mem = res.memory;
  std::vector<std::pair<std::string, std::string>> rows = {
      {"steps", std::to_string(res.steps) +
                    (start_step_ ? " (resumed at " + std::to_string(start_step_) + ")" : "")},
      {"wall time", human_time(res.wall_s)},
      {"throughput", human_count(res.items_per_s) + (gpt_ ? " tokens/s" : " samples/s")},
      {"final train loss",
       res.steps > 0 ? std::to_string(res.final_loss) : std::string("none (no step in this run)")},
      {"eval loss", last_eval_.step >= 0
                        ? detail::concat(std::to_string(res.eval_loss), " (step ", last_eval_.step,
                                         ", ", last_eval_.samples, " samples)")
                        : std::string("none (no evaluation in this run)")},
  };
  if (res.eval_accuracy >= 0)
    rows.push_back({"eval accuracy", std::to_string(res.eval_accuracy * 100) + " %"});
  if (gpt_ && last_eval_.step >= 0)
    rows.push_back({"eval perplexity", std::to_string(last_eval_.perplexity)});
  if (std::isfinite(last_eval_.bits_per_byte))
    rows.push_back({"eval bits per byte", std::to_string(last_eval_.bits_per_byte)});
  rows.push_back({"idle + comm (rank 0)", std::to_string(bubble * 100) + " % of step time"});
  rows.push_back({"exposed comm (rank 0)", human_time(exposed_s) + " (dp " +
                                               human_time(dp_exposed_s_) + ", pp " +
                                               human_time(p2p_s_) + ")"});
  rows.push_back({"hidden dp comm (rank 0)", human_time(dp_hidden_s_)});
  std::string kinds;
  for (int k = 0; k < comm::kOpKinds; ++k)
    if (dp_steps_.calls[k] && k != static_cast<int>(comm::OpKind::Recv))
      kinds += detail::concat(kinds.empty() ? "" : ", ", comm::op_name(comm::OpKind(k)), " ",
                              dp_steps_.calls[k] / nsteps);
  rows.push_back({"dp collectives per step (rank 0)",
                  detail::concat(dp_steps_.total_calls() / nsteps) + " calls, " +
                      human_bytes(dp_steps_.total_bytes() / nsteps) +
                      (kinds.empty() ? "" : " (" + kinds + ")")});
  if (comm::link_emulation().active())
    rows.push_back({"link", "EMULATED " + cfg_.emulate.bandwidth + " " + cfg_.emulate.latency});
  rows.push_back({"dp bytes sent (rank 0)", human_bytes(double(res.dp_bytes))});
  rows.push_back({"pp bytes sent (rank 0)", human_bytes(double(res.pp_bytes))});
  rows.push_back({"params/grads/optim (rank 0)", human_bytes(mem.params) + " / " +
                                                     human_bytes(mem.grads) + " / " +
                                                     human_bytes(mem.optimizer)});
  rows.push_back({"peak activations (rank 0)", human_bytes(double(peak_act_))});
  std::string state, peak;
  for (int q = 0; q < world_.size(); ++q) {
    if (q) state += ", ", peak += ", ";
    state += human_bytes(double(per_rank[kPerRank * q]));
    peak += human_bytes(double(per_rank[kPerRank * q + 3]));
  }
  rows.push_back({"params+grads+optim per rank", state});
  rows.push_back({"peak memory per rank", peak + " (the allocator's, in the steps)"});
  if (cfg_.output.memory_report)
    rows.push_back({"memory report", (fs::path(cfg_.output.dir) / "memory-rank*.txt").string()});
  rows.push_back({"metrics", (fs::path(cfg_.output.dir) / "metrics.jsonl").string()});
  rows.push_back({"loss plot", (fs::path(cfg_.output.dir) / "loss.svg").string()});
  rows.push_back({"checkpoint", (fs::path(cfg_.output.dir) / "checkpoint").string()});
  if (!cfg_.output.trace.empty()) rows.push_back({"timeline", cfg_.output.trace});
  std::fprintf(stderr, "\n%s", train::summary_table("loom run summary", rows).c_str());
}

}  // namespace loom::train
