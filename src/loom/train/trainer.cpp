#include "loom/train/trainer.h"

#include <ATen/record_function.h>

#include <chrono>
#include <cmath>

#include "loom/comm/world.h"
#include "loom/common/cpu_time.h"
#include "loom/common/error.h"
#include "loom/common/log.h"
#include "loom/model/cpu_gemm.h"
#include "loom/model/model.h"
#include "loom/model/partition.h"
#include "loom/parallel/boundary_specs.h"
#include "loom/parallel/data_parallel.h"
#include "loom/parallel/executor.h"
#include "loom/parallel/memory_report.h"
#include "loom/parallel/memory_tracker.h"
#include "loom/parallel/optimizer.h"
#include "loom/plan/parallel.h"
#include "loom/profile/calibration.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/io.h"
#include "loom/schedule/lower.h"
#include "loom/schedule/validate.h"
#include "loom/train/checkpointer.h"
#include "loom/train/data_feed.h"
#include "loom/train/evaluator.h"
#include "loom/train/fault_injection.h"
#include "loom/train/lr_schedule.h"
#include "loom/train/preemption.h"
#include "loom/train/preflight.h"
#include "loom/train/run_trace.h"
#include "loom/train/step_metrics.h"
#include "loom/train/text_sample.h"
#include "loom/train/trace_clock.h"

namespace loom::train {
using Clock = std::chrono::steady_clock;

struct Trainer::Impl {
  config::Config cfg;
  comm::Backend& base;
  Resolved r;
  comm::Mesh mesh;
  model::Compute compute;
  model::Model model;
  model::Partition cut;
  schedule::Schedule lowered;
  std::map<int, std::unique_ptr<parallel::Stage>> stages;
  std::map<int, std::unique_ptr<parallel::DataParallel>> syncs;
  std::map<int, std::unique_ptr<parallel::StageOptimizer>>
      optimizers;  // per stage, over syncs' tensors
  std::unique_ptr<parallel::Executor> exec;
  std::unique_ptr<DataFeed> feed;
  std::unique_ptr<Evaluator> evaluator;
  std::unique_ptr<Checkpointer> checkpointer;
  std::unique_ptr<profile::Calibration> calibration;  // output.calibrate_every > 0
  int64_t start_step = 0;
  int64_t num_params = 0;  // whole model, counted before its blocks are dropped or sharded
  bool is_root = false;

  Impl(const config::Config& c, comm::Backend& b) : cfg(c), base(b) {}

  void setup();
  void build_stages();
  void build_schedule();
  void build_executor();
  std::string schedule_name() const;
  void announce(RunMetrics& metrics) const;
  StepSample train_step(int64_t step, Clock::time_point* t0);
  std::string after_step(int64_t step, int64_t end, RunMetrics& metrics, TrainResult* res);
  bool stop_if_signalled(int64_t step, const std::string& saved, TrainResult* res);
  void finish(RunMetrics& metrics, TrainResult* res);
  TrainResult run(int64_t stop_after);
};

void Trainer::Impl::setup() {
  r = preflight(cfg, base.size(), /*check_output=*/base.rank() == 0);
  torch::set_num_threads(static_cast<int>(cfg.train.threads));
  model::use_cpu_gemm(cfg.train.cpu_gemm);
  compute = model::compute_of(cfg, model::local_rank());
  parallel::MemoryTracker::install();
  if (compute.device.is_cuda()) parallel::MemoryTracker::track_device(compute.device.index());
  if (cfg.output.memory_report)
    parallel::MemoryReport::start(compute.device.is_cuda() ? compute.device.index() : -1);
  RECORD_USER_SCOPE("loom: setup");  // the model, its stages and their state
  mesh = comm::make_mesh(base, r.dp, r.pp, r.tp, cfg.parallel.placement);
  if (!cfg.emulate.bandwidth.empty() || !cfg.emulate.latency.empty()) {
    comm::LinkEmulation e;
    if (!cfg.emulate.bandwidth.empty())
      e.bandwidth_bytes_per_s = config::parse_bandwidth(cfg.emulate.bandwidth);
    if (!cfg.emulate.latency.empty()) e.latency_s = config::parse_duration(cfg.emulate.latency);
    comm::set_link_emulation(e);
  }
  is_root = base.rank() == 0;
  // Built on the CPU (the seed's initialization on every device), then placed.
  model = model::build(cfg.model, cfg.train.seed,
                       {r.tp, mesh.tp_rank, mesh.tp_comm.get(), cfg.parallel.sequence_parallel},
                       cfg.parallel.recompute);
  if (cfg.output.calibrate_every > 0)
    calibration = std::make_unique<profile::Calibration>(cfg.model, r.micro_batch, cfg.train.seed);
  build_stages();
  // Only the ranks that own the first or last stage read data.
  feed = std::make_unique<DataFeed>(cfg, r.dp, mesh.dp_rank, r.m, stages.count(0) > 0,
                                    stages.count(r.pp * r.loops - 1) > 0, compute.device);
  build_schedule();
  build_executor();
  evaluator = std::make_unique<Evaluator>(cfg, base, *exec, *feed, r.m, r.micro_batch,
                                          model.classifier, model.criterion,
                                          stages.count(r.pp * r.loops - 1) > 0, mesh.tp_rank == 0);
  // --overwrite replaces the folder's run, unless the resume continues that run's checkpoint.
  if (cfg.output.overwrite && !resumes_own_folder(cfg.output)) {
    clear_run_folder(cfg.output.dir);
    base.barrier()->wait();  // before rank 0 starts the new metrics
  }
  checkpointer = std::make_unique<Checkpointer>(cfg, r, base, cut, stages, syncs, optimizers);
  if (!cfg.output.resume.empty()) start_step = checkpointer->load(cfg.output.resume);
}

// This rank's stages, as the placement puts them: looping (stage s on pipeline rank s % pp) or
// V (zbv: stages r and 2pp-1-r). Every rank built the whole model (the same initialization
// everywhere); the blocks of other ranks' stages are dropped here, before anything is placed
// on the device, so a pipeline rank holds its own stages' parameters only.
void Trainer::Impl::build_stages() {
  std::vector<double> costs;
  for (auto& b : model.blocks) costs.push_back(b->flops_per_sample());
  cut = model::partition(costs, r.pp * r.loops, cfg.parallel.partition,
                         r.shape().placement == schedule::Placement::V);
  num_params = model.num_parameters();
  for (int s : r.shape().stages_of(mesh.pp_rank)) {
    std::vector<std::shared_ptr<model::Block>> blocks(model.blocks.begin() + cut.begin(s),
                                                      model.blocks.begin() + cut.end(s));
    for (auto& b : blocks) b->to(compute.device);
    stages[s] = std::make_unique<parallel::Stage>(s, r.pp * r.loops, blocks, cut.begin(s),
                                                  model.criterion, compute);
  }
  model.blocks.clear();  // the stages hold theirs
}

void Trainer::Impl::build_schedule() {
  schedule::Schedule compute;
  if (!cfg.parallel.schedule_file.empty())
    compute = schedule::load_csv(cfg.parallel.schedule_file);
  else
    compute = schedule::generate(cfg.parallel.schedule, r.shape());
  LOOM_CHECK(compute.shape.placement == r.placement, "the schedule's placement is not the run's");
  schedule::validate(compute);
  schedule::LowerOptions lo;
  lo.dp_mode = plan::lowering_mode(cfg.parallel.dp_mode, r.dp);
  lo.reshard_after_forward = cfg.parallel.reshard_after_forward;
  lo.max_unsharded = static_cast<int>(cfg.parallel.max_unsharded);
  lowered = schedule::lower(compute, lo);
  schedule::validate(lowered);
}

// The tied head's copy and the boundary shapes first: zero3's synchronizers empty their
// stages' parameter tensors.
void Trainer::Impl::build_executor() {
  std::map<int, parallel::Stage*> sp;
  for (auto& [s, st] : stages) sp[s] = st.get();
  std::unique_ptr<parallel::TiedHead> tied;
  if (config::is_transformer(cfg.model.kind) && cfg.model.tie_embeddings) {
    const schedule::Shape& shape = lowered.shape;
    const auto [weight_tag, grad_tag] = parallel::Executor::spare_tags(shape);
    tied = parallel::TiedHead::make(sp, shape.stages(), shape.rank_of(0),
                                    shape.rank_of(shape.stages() - 1), *mesh.pp_comm, weight_tag,
                                    grad_tag);
  }
  std::vector<parallel::ActivationSpec> boundaries = parallel::infer_boundaries(
      sp, lowered.shape, mesh.pp_rank, *mesh.pp_comm, model::input_spec(cfg.model, r.micro_batch));
  for (auto& [s, st] : stages) {
    parallel::SyncContext ctx{st.get(), mesh.dp_comm.get(), &cfg};
    syncs[s] = parallel::make_data_parallel(ctx);
    optimizers[s] =
        std::make_unique<parallel::StageOptimizer>(syncs[s]->optimized_params(), cfg.train);
  }
  std::map<int, parallel::DpHooks*> yp;
  for (auto& [s, y] : syncs) yp[s] = y.get();
  exec = std::make_unique<parallel::Executor>(lowered, mesh.pp_rank, *mesh.pp_comm, sp, yp,
                                              boundaries);
  exec->tie_head(std::move(tied));
  exec->set_tracing(!cfg.output.trace.empty());
}

std::string Trainer::Impl::schedule_name() const {
  return cfg.parallel.schedule_file.empty() ? cfg.parallel.schedule : "custom";
}

void Trainer::Impl::announce(RunMetrics& metrics) const {
  metrics.message(detail::concat(
      "loom: ", model.name, " with ", human_count(double(num_params)), " parameters, ",
      cut.describe(), " on dp=", r.dp, " x pp=", r.pp,
      r.tp > 1 ? detail::concat(" x tp=", r.tp, cfg.parallel.sequence_parallel ? " sp" : "")
               : std::string(),
      " (loops ", r.loops, ", schedule ", schedule_name(), ", ", r.m, " micro-batches of ",
      r.micro_batch, "), dp-mode ", cfg.parallel.dp_mode, ", comm ",
      comm::backend_name(base.kind()), ", ",
      compute.device.is_cuda() ? "cuda" : "cpu (" + model::cpu_gemm_in_use() + " products)",
      compute.bf16 ? " bf16" : "",
      start_step ? detail::concat(", resumed at step ", start_step) : std::string()));
  if (comm::link_emulation().active())
    metrics.message(
        detail::concat("EMULATED LINK: every communication is delayed as on a ",
                       cfg.emulate.bandwidth.empty() ? "infinitely fast" : cfg.emulate.bandwidth,
                       " link with ", cfg.emulate.latency.empty() ? "0" : cfg.emulate.latency,
                       " latency (emulation, not a real network)"));
}

// One step: feed -> pipeline -> finish data-parallel reductions -> clip -> optimizer step.
// Its time counts from *t0 (see run()), which it moves to its end.
StepSample Trainer::Impl::train_step(int64_t step, Clock::time_point* t0) {
  maybe_inject_fault(base.rank(), step);
  StepSample s;
  s.step = step + 1;
  const double cpu0 = process_cpu_s();
  s.lr = learning_rate(cfg.train.lr_schedule, cfg.train.lr, cfg.train.min_lr, cfg.train.warmup,
                       cfg.train.steps, step);
  MicroBatches mb;
  feed->train(step, &mb);
  ExposedDpWait dp_wait(syncs);
  dp_wait.start();
  const comm::Stats dp0 = mesh.dp_comm->stats(), tp0 = mesh.tp_comm->stats();
  exec->clear_trace();
  parallel::MemoryTracker::reset_peak();
  if (parallel::MemoryReport::on()) parallel::MemoryReport::step_begin();
  const parallel::StepReport rep =
      exec->run_step(mb.inputs, mb.targets, injected_loss_scale(base.rank(), step, 1.0 / r.m));
  for (auto& [st, y] : syncs) y->finish_grad_sync();
  // One all-reduce gives the loss and the squared gradient norm: the step's update is decided
  // on both (clipping, and the guard against non-finite values).
  double sums[2] = {0, 0};
  for (auto& [st, stage] : stages)  // the tensor-parallel ranks of a replica share one loss
    if (stage->is_last() && mesh.tp_rank == 0) sums[0] += stage->loss_sum();
  for (auto& [st, y] : syncs) sums[1] += y->grad_norm_sq();
  base.all_reduce(sums, 2, comm::DType::Float64)->wait();
  s.loss = sums[0] / (double(r.dp) * r.m);
  s.grad_norm = std::sqrt(sums[1]);
  s.skipped = !std::isfinite(s.loss) || !std::isfinite(s.grad_norm);
  if (s.skipped && cfg.train.on_nan == config::NanPolicy::Stop) {
    checkpointer->complete_pending();  // the previous step's state is sound
    throw AgreedError(
        detail::concat(
            "step ", s.step, ": the loss is ", s.loss, " and the gradient norm ", s.grad_norm,
            "; stopped before the update (train.on_nan = stop), the last checkpoint (",
            checkpointer->last_step() ? detail::concat("step ", checkpointer->last_step()) : "none",
            ") is kept; lower train.lr, or set --on-nan skip"),
        /*reporter=*/0);
  }
  const double scale =
      cfg.train.clip > 0 ? std::min(1.0, cfg.train.clip / (s.grad_norm + 1e-6)) : 1.0;
  {
    RECORD_USER_SCOPE("loom: optimizer step");  // names its allocations (memory report)
    for (auto& [st, y] : syncs) {
      y->before_step();
      if (s.skipped)
        y->drop_step();  // train.on_nan = skip: no update; no non-finite state is kept
      else
        optimizers.at(st)->step(s.lr, scale);
      y->after_step();
    }
  }
  s.dp = mesh.dp_comm->stats() - dp0;
  s.tp = mesh.tp_comm->stats() - tp0;
  s.dp_exposed_s = dp_wait.stop();
  const auto t_end = Clock::now();
  s.step_s = std::chrono::duration<double>(t_end - *t0).count();
  *t0 = t_end;
  s.compute_s = rep.compute_s;
  s.compute_cpu_s = rep.compute_cpu_s;
  s.p2p_wait_s = rep.p2p_wait_s;
  s.peak_activation_bytes = rep.peak_activation_bytes;
  s.peak_working_bytes = rep.peak_working_bytes;
  s.peak_transient_bytes = rep.peak_transient_bytes;
  s.peak_bytes = parallel::MemoryTracker::peak_bytes();
  if (parallel::MemoryReport::on()) parallel::MemoryReport::step_end();
  for (auto& [st, y] : syncs)
    for (auto& [k, v] : y->step_metrics())
      s.sync_metrics.push_back({k + "." + std::to_string(st), v});
  s.cpu_s = process_cpu_s() - cpu0;
  return s;
}

// Calibration, evaluation and checkpoints, each on its own period (the last step evaluates
// and checkpoints always). Returns the folder of a checkpoint of this step written, or "" (none,
// or one begun under output.async_save: completed at the end of a later step where every rank
// has written its file, by the next save, or by a save of the same step: a stop signal's).
std::string Trainer::Impl::after_step(int64_t step, int64_t end, RunMetrics& metrics,
                                      TrainResult* res) {
  const int64_t done = step + 1;
  // A save begun at an earlier step, once written on every rank (a write that outlasts a step
  // goes on beside the next); a save due now completes it whatever.
  if (checkpointer->pending_written()) checkpointer->complete_pending();
  if (calibration && done % cfg.output.calibrate_every == 0 && done < end) {
    const profile::Calibration::Times t = calibration->run(base);
    metrics.calibration(done, calibration->micro_batch(), t.alone, t.loaded);
  }
  const bool last = done == cfg.train.steps;
  if (last)
    for (auto& [st, y] : syncs) y->end_of_run();
  const bool whole_split = last && cfg.train.final_eval;
  if ((cfg.train.eval_every > 0 && done % cfg.train.eval_every == 0) || whole_split)
    metrics.eval(done, evaluator->run(/*final=*/whole_split), res);
  if (cfg.output.sample_every > 0 && done % cfg.output.sample_every == 0) {
    const SampleContext sc{&cfg,
                           &base,
                           &mesh,
                           exec.get(),
                           r.m,
                           r.micro_batch,
                           stages.count(0) > 0,
                           stages.count(r.pp * r.loops - 1) > 0,
                           compute.device};
    const std::string text = sample_text(sc, done);
    if (is_root) metrics.message(detail::concat("sample at step ", done, ": ", text));
  }
  if ((cfg.output.checkpoint_every > 0 && done % cfg.output.checkpoint_every == 0) || last) {
    if (last || !cfg.output.async_save) return checkpointer->save(done);
    checkpointer->begin_save(done);
  }
  return "";
}

// Preemption: the ranks agree whether any was signalled; if so, all checkpoint this step.
bool Trainer::Impl::stop_if_signalled(int64_t step, const std::string& saved, TrainResult* res) {
  if (!stop_handlers_installed()) return false;
  const int sig = agree_stop_signal(base);
  if (!sig) return false;
  res->stop_signal = sig;
  res->stop_step = step + 1;
  res->stop_checkpoint = saved.empty() ? checkpointer->save(step + 1) : saved;
  return true;
}

// After the steps: the timeline, the final parameters and the summary.
void Trainer::Impl::finish(RunMetrics& metrics, TrainResult* res) {
  checkpointer->complete_pending();  // a run stopped before its last step
  metrics.end_steps(res);
  if (parallel::MemoryReport::on())
    parallel::MemoryReport::write(
        detail::concat(cfg.output.dir, "/memory-rank", base.rank(), ".txt"),
        detail::concat("loom memory report, rank ", base.rank(), " (", compute.device.str(),
                       "), the training steps' peak"));
  if (!cfg.output.trace.empty()) {
    auto events = gather_events(base, exec->trace());
    if (is_root) write_run_trace(cfg.output.trace, events, lowered, r.dp, schedule_name());
  }
  for (auto& [s, st] : stages) {
    std::vector<parallel::NamedParam> full = syncs.at(s)->full_params();  // DP collective
    for (auto& p : full.empty() ? st->params() : full)
      res->params[p.name] = p.tensor.detach().clone();
  }
  parallel::MemoryBytes mem;
  for (auto& [s, y] : syncs) {
    auto m = y->memory();
    m.optimizer += optimizers.at(s)->state_bytes();
    mem.params += m.params;
    mem.grads += m.grads;
    mem.optimizer += m.optimizer;
    mem.working += m.working;
  }
  mem.params += exec->tied_copy_bytes();  // a tied head's copy and its gradient
  mem.grads += exec->tied_copy_bytes();
  metrics.summarize(mem, res);
  checkpointer->copy_last_metrics();
}

TrainResult Trainer::Impl::run(int64_t stop_after) {
  TrainResult res;
  RunMetrics metrics(cfg, base, *mesh.dp_comm, *mesh.pp_comm, start_step);
  announce(metrics);
  const int64_t total = cfg.train.steps;
  const int64_t end = stop_after > 0 ? std::min(total, start_step + stop_after) : total;
  if (!cfg.output.trace.empty())
    exec->set_trace_origin(shared_trace_origin(base, [&] { return exec->trace_clock_us(); }));
  // A step's time runs from where the previous one's ended, so that what a step leaves in
  // flight (ZeRO-1/2's all-gather of the parameters, waited for by the next compute) and the
  // bookkeeping between steps count; evaluation, samples and checkpoints do not.
  Clock::time_point t0 = Clock::now();
  for (int64_t step = start_step; step < end; ++step) {
    metrics.step(train_step(step, &t0), &res);
    const auto periodic = Clock::now();
    const std::string saved = after_step(step, end, metrics, &res);
    t0 += Clock::now() - periodic;
    if (step + 1 < end && stop_if_signalled(step, saved, &res)) break;
  }
  finish(metrics, &res);
  return res;
}

Trainer::Trainer(const config::Config& cfg, comm::Backend& base)
    : impl_(std::make_unique<Impl>(cfg, base)) {
  impl_->setup();
}
Trainer::~Trainer() = default;
TrainResult Trainer::run(int64_t stop_after) {
  return impl_->run(stop_after);
}
std::string Trainer::checkpoint() {
  return impl_->checkpointer->save(impl_->start_step);
}

}  // namespace loom::train
