#pragma once
// What a run reports, each number with one owner: this class writes the per-step, evaluation
// and calibration lines of metrics.jsonl (rank 0), keeps the run totals, fills the measured
// fields of TrainResult, writes the summary line and table at the end, and keeps loss.svg
// (loss_plot.h) up to date at each evaluation and at the end.
// The exposed data-parallel wait has its own owner too (ExposedDpWait): the time the training
// thread spent in Work::wait on the synchronizers' operations, as they count it.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/common/files.h"
#include "loom/config/config.h"
#include "loom/train/loss_plot.h"
#include "loom/train/report.h"

namespace loom::parallel {
class DataParallel;
struct MemoryBytes;
}  // namespace loom::parallel

namespace loom::train {

struct EvalResult;  // evaluator.h

struct TrainResult;

// Reads the synchronizers' exposed wait over one step: start() before the step's first
// action, stop() after the optimizer step (so evaluation and checkpoints are not counted).
class ExposedDpWait {
 public:
  explicit ExposedDpWait(const std::map<int, std::unique_ptr<parallel::DataParallel>>& syncs)
      : syncs_(syncs) {}
  void start();
  double stop();  // seconds

 private:
  const std::map<int, std::unique_ptr<parallel::DataParallel>>& syncs_;
};

// What one training step measured on this rank.
struct StepSample {
  int64_t step = 0;  // steps completed
  double loss = 0, lr = 0, step_s = 0;
  double grad_norm = NAN;  // reported with train.clip only
  bool skipped = false;    // non-finite loss or gradient norm: no update (train.on_nan = skip)
  double compute_s = 0, p2p_wait_s = 0;
  double cpu_s = 0;          // CPU time of the whole process (every thread) in the step
  double compute_cpu_s = 0;  // of that, the computing thread's in F/B/I/W
  double dp_exposed_s = 0;   // ExposedDpWait
  comm::Stats dp;            // the DP communicator's operations in the step
  comm::Stats tp;            // the TP communicator's (tensor parallelism)
  int64_t peak_activation_bytes = 0, peak_working_bytes = 0, peak_transient_bytes = 0;
  int64_t peak_bytes = 0;                                    // allocator peak (MemoryTracker)
  std::vector<std::pair<std::string, double>> sync_metrics;  // "name.stage" -> value
};

// What steps_up_to found: lines that are not JSON (removed), the last training step kept.
struct MetricsHistory {
  int64_t damaged = 0;
  int64_t last_step = 0;
};
// The lines of metrics.jsonl `lines` that belong to steps up to `step` (a step's line and its
// evaluation's), in order: what a run resumed at `step` keeps. Lines that are not JSON go.
std::string steps_up_to(const std::string& lines, int64_t step, MetricsHistory* history = nullptr);

class RunMetrics {
 public:
  // Opens metrics.jsonl (appends after a resume) and writes config.toml on rank 0.
  RunMetrics(const config::Config& cfg, comm::Backend& world, comm::Backend& dp_comm,
             comm::Backend& pp_comm, int64_t start_step);

  void message(const std::string& line);  // rank 0, above the progress bar
  // Collective over world (the step's bubble).
  void step(const StepSample& s, TrainResult* res);
  void calibration(int64_t step, int64_t micro_batch, const std::vector<double>& alone,
                   const std::vector<double>& loaded);
  // An evaluation after `step` steps (the last step's reads the whole split: evaluator.h).
  // Language models add perplexity and, on text, bits per byte to the loss.
  void eval(int64_t step, const EvalResult& e, TrainResult* res);
  // After the last step: wall time, throughput and bytes sent.
  void end_steps(TrainResult* res);
  // Collective over world (every rank's state and peak bytes): memory, the summary line and
  // the summary table.
  void summarize(const parallel::MemoryBytes& mem, TrainResult* res);

 private:
  void write(const std::string& line);
  void summary_line(const TrainResult& res, const std::vector<int64_t>& per_rank, double nsteps);
  void summary_table(const TrainResult& res, const std::vector<int64_t>& per_rank, double nsteps);
  void write_plot();

  // The last evaluation, for the summary.
  struct LastEval {
    int64_t step = -1, samples = 0;
    double loss = NAN, accuracy = -1, perplexity = NAN, bits_per_byte = NAN;
  };

  const config::Config& cfg_;
  comm::Backend& world_;
  comm::Backend& dp_comm_;
  comm::Backend& pp_comm_;
  int64_t start_step_;
  bool root_;
  bool gpt_;
  double items_per_step_;
  std::unique_ptr<LineFile> file_;  // metrics.jsonl (rank 0)
  std::unique_ptr<Progress> progress_;
  double eval_bytes_per_token_ = 0;  // text only (rank 0)
  LastEval last_eval_;
  LossCurves curves_;         // rank 0
  bool plot_failed_ = false;  // warned once
  comm::Stats dp0_, pp0_;     // counters when the run started
  std::chrono::steady_clock::time_point t_run_;

  // Run totals (this rank).
  double steps_time_ = 0, compute_s_ = 0, p2p_s_ = 0, dp_exposed_s_ = 0, dp_hidden_s_ = 0;
  comm::Stats dp_steps_;  // DP collectives of the steps (no evaluation, no checkpoints)
  int64_t peak_act_ = 0, peak_working_ = 0, peak_transient_ = 0;
  int64_t peak_allocated_ = 0;  // the allocator's, over the run's steps
};

}  // namespace loom::train
