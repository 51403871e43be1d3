#include "loom/train/trainer.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/common/log.h"
#include "loom/data/dataset.h"
#include "loom/data/sampler.h"
#include "loom/model/model.h"
#include "loom/model/partition.h"
#include "loom/parallel/executor.h"
#include "loom/parallel/memory_tracker.h"
#include "loom/parallel/data_parallel.h"
#include "loom/parallel/optimizer.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/io.h"
#include "loom/schedule/lower.h"
#include "loom/schedule/validate.h"
#include "loom/train/calibration.h"
#include "loom/train/checkpoint.h"
#include "loom/train/lr_schedule.h"
#include "loom/train/preflight.h"
#include "loom/train/report.h"

namespace loom::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

torch::Tensor to_tensor(const data::Array& a) {
  if (a.type == data::ElemType::Int64)
    return torch::from_blob(const_cast<int64_t*>(a.i64.data()), a.shape, torch::kInt64).clone();
  return torch::from_blob(const_cast<float*>(a.f32.data()), a.shape, torch::kFloat32).clone();
}

// Fault injection for the tests that prove a dying rank brings the job down:
// LOOM_FAULT_RANK=r LOOM_FAULT_STEP=s kills rank r (SIGKILL, no clean-up) at step s;
// with LOOM_FAULT_KIND=hang the rank stops communicating instead (sleeps), so that the
// others' timeouts fire.
void maybe_inject_fault(int rank, int64_t step) {
  static const char* r = std::getenv("LOOM_FAULT_RANK");
  static const char* s = std::getenv("LOOM_FAULT_STEP");
  static const char* kind = std::getenv("LOOM_FAULT_KIND");
  if (!r || !s || std::atoi(r) != rank || std::atoll(s) != step) return;
  bool hang = kind && std::string(kind) == "hang";
  std::fprintf(stderr, "[rank %d] LOOM_FAULT_RANK: %s this rank at step %lld\n", rank,
               hang ? "hanging" : "killing", static_cast<long long>(step));
  if (hang)
    std::this_thread::sleep_for(std::chrono::hours(1));
  else
    std::raise(SIGKILL);
}

double world_sum(comm::Backend& c, double v) {
  c.all_reduce(&v, 1, comm::DType::Float64)->wait();
  return v;
}

}  // namespace

struct Trainer::Impl {
  config::Config cfg;
  comm::Backend& base;
  Resolved r;
  comm::Mesh mesh;
  model::Model model;
  model::Partition cut;
  schedule::Schedule lowered;
  std::map<int, std::unique_ptr<parallel::Stage>> stages;
  std::map<int, std::unique_ptr<parallel::DataParallel>> syncs;
  std::map<int, std::unique_ptr<parallel::StageOptimizer>> optimizers;  // per stage, over syncs' tensors
  std::unique_ptr<parallel::Executor> exec;
  std::unique_ptr<data::Dataset> train_set, eval_set;
  std::unique_ptr<data::Sampler> sampler, eval_sampler;
  std::unique_ptr<Calibration> calibration;  // output.calibrate_every > 0
  bool needs_inputs = false, needs_targets = false;
  int64_t start_step = 0;
  int64_t num_params = 0;  // whole model, counted before sharding
  bool is_root = false;

  Impl(const config::Config& c, comm::Backend& b) : cfg(c), base(b) {}

  void setup();
  void build_schedule();
  std::vector<parallel::ActivationSpec> infer_boundaries();
  void microbatches(data::Dataset& ds, data::Sampler& smp, int64_t step, std::vector<torch::Tensor>* in,
                    std::vector<torch::Tensor>* tgt);
  std::pair<double, double> evaluate();
  void save_checkpoint(int64_t steps_done);
  void load_checkpoint(const std::string& path);
  void write_trace(const std::string& path);
  void share_trace_origin();
  TrainResult run(int64_t stop_after);
};

void Trainer::Impl::setup() {
  r = preflight(cfg, base.size(), /*check_output=*/base.rank() == 0);
  torch::set_num_threads(static_cast<int>(cfg.train.threads));
  parallel::MemoryTracker::install();
  mesh = comm::make_mesh(base, r.dp, r.pp);
  if (!cfg.emulate.bandwidth.empty() || !cfg.emulate.latency.empty()) {
    comm::LinkEmulation e;
    if (!cfg.emulate.bandwidth.empty()) e.bandwidth_bytes_per_s = config::parse_bandwidth(cfg.emulate.bandwidth);
    if (!cfg.emulate.latency.empty()) e.latency_s = config::parse_duration(cfg.emulate.latency);
    comm::set_link_emulation(e);
  }
  is_root = base.rank() == 0;

  model = model::build(cfg.model, cfg.train.seed);
  if (cfg.output.calibrate_every > 0)
    calibration = std::make_unique<Calibration>(cfg.model, r.micro_batch, cfg.train.seed);
  std::vector<double> costs;
  for (auto& b : model.blocks) costs.push_back(b->flops_per_sample());
  cut = model::partition(costs, r.pp * r.loops, cfg.parallel.partition);
  for (int s = mesh.pp_rank; s < r.pp * r.loops; s += r.pp) {
    std::vector<std::shared_ptr<model::Block>> blocks(model.blocks.begin() + cut.begin(s),
                                                      model.blocks.begin() + cut.end(s));
    stages[s] = std::make_unique<parallel::Stage>(s, r.pp * r.loops, blocks, cut.begin(s));
  }
  needs_inputs = stages.count(0) > 0;
  needs_targets = stages.count(r.pp * r.loops - 1) > 0;

  // Data: only the ranks that own the first or last stage read it.
  std::string path = default_data_path(cfg);
  auto open = [&](data::Split split) -> std::unique_ptr<data::Dataset> {
    if (cfg.data.kind == "fashion-mnist") return data::open_idx_images(path, split);
    if (cfg.data.kind == "text")
      return data::open_text(path, cfg.model.seq_len, split, cfg.data.test_fraction);
    uint64_t seed = cfg.train.seed + (split == data::Split::Test ? 7919 : 0);
    int64_t n = split == data::Split::Test ? std::max<int64_t>(1, cfg.data.synthetic_size / 10)
                                           : cfg.data.synthetic_size;
    if (cfg.model.kind == "gpt") return data::synthetic_tokens(cfg.model.vocab, cfg.model.seq_len, n, seed);
    return data::synthetic_classification({1, 28, 28}, cfg.model.classes, n, seed);
  };
  train_set = open(data::Split::Train);
  eval_set = open(data::Split::Test);
  sampler = std::make_unique<data::Sampler>(train_set->size(), cfg.train.seed, true);
  eval_sampler = std::make_unique<data::Sampler>(eval_set->size(), cfg.train.seed, false);

  build_schedule();
  // Before the synchronizers: zero3 empties its stages' parameter tensors.
  std::vector<parallel::ActivationSpec> boundaries = infer_boundaries();
  num_params = model.num_parameters();
  for (auto& [s, st] : stages) {
    parallel::SyncContext ctx{st.get(), mesh.dp_comm.get(), &cfg};
    syncs[s] = parallel::make_data_parallel(ctx);
    optimizers[s] = std::make_unique<parallel::StageOptimizer>(syncs[s]->optimized_params(), cfg.train);
  }
  std::map<int, parallel::Stage*> sp;
  std::map<int, parallel::DpHooks*> yp;
  for (auto& [s, st] : stages) sp[s] = st.get();
  for (auto& [s, y] : syncs) yp[s] = y.get();
  exec = std::make_unique<parallel::Executor>(lowered, mesh.pp_rank, *mesh.pp_comm, sp, yp,
                                              boundaries);
  exec->set_tracing(!cfg.output.trace.empty());
  if (!cfg.output.resume.empty()) load_checkpoint(cfg.output.resume);
}

void Trainer::Impl::build_schedule() {
  schedule::Schedule compute;
  if (!cfg.parallel.schedule_file.empty())
    compute = schedule::load_csv(cfg.parallel.schedule_file);
  else
    compute = schedule::generate(cfg.parallel.schedule, {r.pp, r.loops, r.m});
  schedule::validate(compute);
  schedule::LowerOptions lo;
  lo.dp_mode = r.dp == 1 ? schedule::DpMode::None
               : cfg.parallel.dp_mode == "zero3" ? schedule::DpMode::ZeroParams
                                                 : schedule::DpMode::Reduce;
  lo.reshard_after_forward = cfg.parallel.reshard_after_forward;
  lo.max_unsharded = static_cast<int>(cfg.parallel.max_unsharded);
  lowered = schedule::lower(compute, lo);
  schedule::validate(lowered);
}

// Shapes of each stage's input for one micro-batch, from a no-grad forward of the full model
// (every rank holds it at setup) on a micro-batch of synthetic-but-valid input.
std::vector<parallel::ActivationSpec> Trainer::Impl::infer_boundaries() {
  torch::NoGradGuard no_grad;
  torch::Tensor x;
  if (cfg.model.kind == "gpt")
    x = torch::zeros({r.micro_batch, cfg.model.seq_len}, torch::kInt64);
  else
    x = torch::zeros({r.micro_batch, 1, 28, 28}, torch::kFloat32);
  std::vector<parallel::ActivationSpec> out(r.pp * r.loops + 1);
  for (int s = 0; s < r.pp * r.loops; ++s) {
    out[s].shape = x.sizes().vec();
    out[s].dtype = x.scalar_type();
    for (int b = cut.begin(s); b < cut.end(s); ++b) x = model.blocks[b]->forward(x);
  }
  out.back().shape = x.sizes().vec();
  return out;
}

void Trainer::Impl::microbatches(data::Dataset& ds, data::Sampler& smp, int64_t step,
                                 std::vector<torch::Tensor>* in, std::vector<torch::Tensor>* tgt) {
  in->clear();
  tgt->clear();
  if (!needs_inputs && !needs_targets) return;
  for (int j = 0; j < r.m; ++j) {
    auto idx = smp.microbatch(step, cfg.train.global_batch, r.dp, mesh.dp_rank, r.m, j);
    data::Batch b = ds.get(idx);
    in->push_back(needs_inputs ? to_tensor(b.input) : torch::Tensor());
    tgt->push_back(needs_targets ? to_tensor(b.target) : torch::Tensor());
  }
}

std::pair<double, double> Trainer::Impl::evaluate() {
  double loss_sum = 0, correct = 0, count = 0;
  int64_t batches = std::max<int64_t>(1, std::min<int64_t>(
      cfg.train.eval_batches, eval_set->size() / cfg.train.global_batch));
  if (eval_set->size() < cfg.train.global_batch) batches = 0;
  std::vector<torch::Tensor> in, tgt;
  for (int64_t i = 0; i < batches; ++i) {
    microbatches(*eval_set, *eval_sampler, i, &in, &tgt);
    auto logits = exec->run_forward(in, r.m);
    if (needs_targets) {
      for (int j = 0; j < r.m; ++j) {
        torch::NoGradGuard ng;
        double l = model::Model::loss(logits[j], tgt[j]).item<double>();
        loss_sum += l;
        count += 1;
        if (model.classifier) correct += logits[j].argmax(1).eq(tgt[j]).sum().item<double>();
      }
    }
  }
  // Only the last stage's ranks (one per replica) contribute.
  double n_loss = world_sum(base, count);
  double total = world_sum(base, loss_sum);
  double acc = world_sum(base, correct);
  double samples = n_loss * r.micro_batch;
  return {n_loss > 0 ? total / n_loss : NAN, model.classifier && samples > 0 ? acc / samples : -1};
}

void Trainer::Impl::save_checkpoint(int64_t steps_done) {
  fs::path root = fs::path(cfg.output.dir) / "checkpoint";
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(steps_done));
  fs::path dir = root / name;
  fs::create_directories(dir);  // every rank: nodes need not share a file system
  {
    torch::serialize::OutputArchive ar;
    for (auto& [s, st] : stages)
      if (!syncs.at(s)->saves_params())  // sharded modes write their shard in sync.<s>
        for (auto& p : st->params()) ar.write("param." + p.name, p.tensor.detach());
    for (auto& [s, y] : syncs) {
      torch::serialize::OutputArchive sub, opt;
      y->save(sub);
      ar.write("sync." + std::to_string(s), sub);
      optimizers.at(s)->save(opt);
      ar.write("optimizer." + std::to_string(s), opt);
    }
    ar.write("rng", torch::Tensor(at::detail::getDefaultCPUGenerator().get_state()));
    char file[32];
    std::snprintf(file, sizeof file, "rank-%05d.pt", base.rank());
    std::string tmp = (dir / (std::string(file) + ".tmp")).string();
    ar.save_to(tmp);
    fs::rename(tmp, dir / file);
  }
  base.barrier()->wait();
  if (is_root) {
    Manifest m{steps_done, base.size(), r.dp, r.pp, r.loops, cfg.parallel.dp_mode,
               cfg.model.kind, cfg.parallel.schedule};
    write_file_atomic((dir / "manifest.json").string(), manifest_to_json(m));
    write_file_atomic((root / "latest").string(), std::string(name) + "\n");
    // Keep only the newest complete checkpoint.
    for (auto& e : fs::directory_iterator(root))
      if (e.is_directory() && e.path().filename() != name &&
          e.path().filename().string().rfind("step-", 0) == 0)
        fs::remove_all(e.path());
  }
  base.barrier()->wait();
}

void Trainer::Impl::load_checkpoint(const std::string& path) {
  std::string dir;
  Manifest m = read_manifest(path, &dir);
  if (m.world != base.size() || m.dp != r.dp || m.pp != r.pp || m.loops != r.loops ||
      m.dp_mode != cfg.parallel.dp_mode || m.model_kind != cfg.model.kind)
    LOOM_USAGE("checkpoint '", dir, "' was written with world=", m.world, " dp=", m.dp, " pp=",
               m.pp, " loops=", m.loops, " dp_mode=", m.dp_mode, " model=", m.model_kind,
               "; resume with the same settings");
  char file[32];
  std::snprintf(file, sizeof file, "rank-%05d.pt", base.rank());
  fs::path f = fs::path(dir) / file;
  if (!fs::exists(f)) LOOM_USAGE("checkpoint file '", f.string(), "' is missing; the checkpoint is incomplete");
  torch::serialize::InputArchive ar;
  ar.load_from(f.string());
  torch::NoGradGuard ng;
  for (auto& [s, st] : stages) {
    if (syncs.at(s)->saves_params()) continue;  // restored by the sync from its shard
    for (auto& p : st->params()) {
      torch::Tensor t;
      ar.read("param." + p.name, t);
      p.tensor.copy_(t);
    }
  }
  for (auto& [s, y] : syncs) {
    torch::serialize::InputArchive sub, opt;
    ar.read("sync." + std::to_string(s), sub);
    y->load(sub);
    ar.read("optimizer." + std::to_string(s), opt);
    optimizers.at(s)->load(opt);
  }
  torch::Tensor rng;
  ar.read("rng", rng);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(rng);
  start_step = m.step;
}

// One time origin for every rank's timeline. Ranks on one machine read the same monotonic
// clock, so they take rank 0's origin and line up exactly; across machines the clocks are
// unrelated, and each rank starts its own as a barrier releases them (skew: the barrier's,
// more when ranks share cores).
void Trainer::Impl::share_trace_origin() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const double h = double(std::hash<std::string>{}(host) % (1ull << 52));  // exact in a double
  double id[2] = {h, -h};  // max of both: the largest and (minus) the smallest host hash
  base.all_reduce(id, 2, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  const bool one_machine = id[0] == -id[1];
  base.barrier()->wait();
  double origin = exec->trace_clock_us();
  if (one_machine) base.broadcast(&origin, 1, comm::DType::Float64, 0)->wait();
  exec->set_trace_origin(origin);
}

// The executor's events of the last step, from every rank, as a Chrome trace (all ranks) and
// an SVG of the pipeline (the ranks of replica 0) drawn like the generated schedule.
void Trainer::Impl::write_trace(const std::string& path) {
  std::ostringstream os;
  for (const auto& e : exec->trace())
    os << e.name << ' ' << e.cat << ' ' << e.start_us << ' ' << e.dur_us << '\n';
  std::string mine = os.str();
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(base.size());
  base.all_gather(&len, lens.data(), 1, comm::DType::Int64)->wait();
  if (!is_root) {
    if (len) base.send(mine.data(), mine.size(), comm::DType::UInt8, 0, 4242)->wait();
    return;
  }
  std::vector<std::string> parts(base.size());
  parts[0] = mine;
  for (int q = 1; q < base.size(); ++q) {
    parts[q].assign(lens[q], '\0');
    if (lens[q]) base.recv(parts[q].data(), parts[q].size(), comm::DType::UInt8, q, 4242)->wait();
  }
  double t0 = 1e300;
  for (auto& p : parts) {
    std::istringstream is(p);
    std::string n, c;
    double st, du;
    while (is >> n >> c >> st >> du) t0 = std::min(t0, st);
  }
  std::string json = "{\"traceEvents\":[\n";
  schedule::Timing timing;
  timing.ranks.resize(r.pp);
  for (int q = 0; q < base.size(); ++q) {
    json += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" + std::to_string(q) +
            ",\"args\":{\"name\":\"rank " + std::to_string(q) + "\"}}";
    std::istringstream is(parts[q]);
    std::string n, c;
    double st, du;
    while (is >> n >> c >> st >> du) {
      char ev[256];
      std::snprintf(ev, sizeof ev,
                    ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
                    "\"ts\":%.1f,\"dur\":%.1f}",
                    n.c_str(), c.c_str(), q, st - t0, du);
      json += ev;
      bool replica0 = q % r.dp == 0;
      if (replica0 && n.rfind("wait:", 0) != 0) {
        schedule::Action a = schedule::parse_action(n);
        if (!schedule::is_compute(a.kind)) continue;
        double s_ms = (st - t0) / 1000.0, e_ms = s_ms + du / 1000.0;
        timing.ranks[q / r.dp].push_back({a, s_ms, e_ms});
        timing.makespan = std::max(timing.makespan, e_ms);
      }
    }
    json += q + 1 < base.size() ? ",\n" : "\n";
  }
  json += "]}\n";
  write_file_atomic(path, json);
  std::string svg_path = fs::path(path).replace_extension(".svg").string();
  schedule::Schedule shown = lowered;
  shown.name = "measured " + (cfg.parallel.schedule_file.empty() ? cfg.parallel.schedule : "custom");
  write_file_atomic(svg_path, schedule::render_svg(shown, timing, " ms"));
}

TrainResult Trainer::Impl::run(int64_t stop_after) {
  TrainResult res;
  const int64_t total = cfg.train.steps;
  const bool gpt = cfg.model.kind == "gpt";
  const double items_per_step = double(cfg.train.global_batch) * (gpt ? cfg.model.seq_len : 1);
  std::unique_ptr<std::ofstream> metrics;
  if (is_root) {
    fs::create_directories(cfg.output.dir);
    write_file_atomic((fs::path(cfg.output.dir) / "config.toml").string(), config::to_toml(cfg));
    metrics = std::make_unique<std::ofstream>(fs::path(cfg.output.dir) / "metrics.jsonl",
                                              start_step > 0 ? std::ios::app : std::ios::trunc);
  }
  Progress progress(total, is_root && cfg.output.progress, gpt ? "tokens" : "samples");
  if (is_root)
    progress.message(detail::concat(
        "loom: ", model.name, " with ", human_count(double(num_params)),
        " parameters, ", cut.describe(), " on dp=", r.dp, " x pp=", r.pp, " (loops ", r.loops,
        ", schedule ", cfg.parallel.schedule_file.empty() ? cfg.parallel.schedule : "custom",
        ", ", r.m, " micro-batches of ", r.micro_batch, "), dp-mode ", cfg.parallel.dp_mode,
        ", comm ", comm::backend_name(base.kind()),
        start_step ? detail::concat(", resumed at step ", start_step) : std::string()));
  if (is_root && comm::link_emulation().active())
    progress.message(detail::concat(
        "EMULATED LINK: every communication is delayed as on a ",
        cfg.emulate.bandwidth.empty() ? "infinitely fast" : cfg.emulate.bandwidth, " link with ",
        cfg.emulate.latency.empty() ? "0" : cfg.emulate.latency,
        " latency (emulation, not a real network)"));

  comm::Stats dp0 = mesh.dp_comm->stats(), pp0 = mesh.pp_comm->stats();
  std::vector<torch::Tensor> in, tgt;
  auto t_run = Clock::now();
  double compute_s = 0, exposed_s = 0, loss = NAN, steps_time = 0;
  // Data-parallel communication: exposed = time blocked in Work::wait on DP operations (sum of
  // the synchronizers' exposed_wait_s); busy = Stats::busy_s (post to completion, summed over
  // operations); hidden = busy - exposed, the part that overlapped other work.
  double dp_exposed_s = 0, dp_hidden_s = 0, p2p_s = 0;
  comm::Stats dp_steps;  // DP collectives of the steps run (no evaluation, no checkpoints)
  int64_t peak_act = 0, peak_working = 0, peak_transient = 0;
  const int64_t end = stop_after > 0 ? std::min(total, start_step + stop_after) : total;
  if (!cfg.output.trace.empty()) share_trace_origin();
  for (int64_t step = start_step; step < end; ++step) {
    auto t0 = Clock::now();
    maybe_inject_fault(base.rank(), step);
    double lr = learning_rate(cfg.train.lr_schedule, cfg.train.lr, cfg.train.min_lr,
                              cfg.train.warmup, total, step);
    microbatches(*train_set, *sampler, step, &in, &tgt);
    for (auto& [s, y] : syncs) y->reset_exposed();
    const comm::Stats dp_step0 = mesh.dp_comm->stats();
    exec->clear_trace();
    parallel::MemoryTracker::reset_peak();
    parallel::StepReport rep = exec->run_step(in, tgt, 1.0 / r.m);
    auto tw = Clock::now();
    for (auto& [s, y] : syncs) y->finish_grad_sync();
    double sync_wait = seconds_since(tw);
    double scale = 1.0, norm = NAN;
    if (cfg.train.clip > 0) {
      double sq = 0;
      for (auto& [s, y] : syncs) sq += y->grad_norm_sq();
      norm = std::sqrt(world_sum(base, sq));
      scale = std::min(1.0, cfg.train.clip / (norm + 1e-6));
    }
    for (auto& [s, y] : syncs) {
      y->before_step();
      optimizers.at(s)->step(lr, scale);
      y->after_step();
    }
    const comm::Stats dp_step = mesh.dp_comm->stats() - dp_step0;
    double dp_exposed = 0;
    for (auto& [s, y] : syncs) dp_exposed += y->exposed_wait_s();
    const double dp_hidden = std::max(0.0, dp_step.busy_s - dp_exposed);
    dp_exposed_s += dp_exposed;
    dp_hidden_s += dp_hidden;
    dp_steps += dp_step;
    res.dp_last_step = dp_step;
    double loss_sum = 0;
    for (auto& [s, st] : stages)
      if (st->is_last()) loss_sum += st->loss_sum();
    loss = world_sum(base, loss_sum) / (double(r.dp) * r.m);
    double dt = seconds_since(t0);
    // Measured bubble: the share of the step that an average rank did not spend computing.
    double bubble_step = 1.0 - world_sum(base, rep.compute_s) / base.size() / dt;
    steps_time += dt;
    compute_s += rep.compute_s;
    exposed_s += rep.p2p_wait_s + dp_exposed;
    p2p_s += rep.p2p_wait_s;
    peak_act = std::max(peak_act, rep.peak_activation_bytes);
    peak_working = std::max(peak_working, rep.peak_working_bytes);
    peak_transient = std::max(peak_transient, rep.peak_transient_bytes);
    res.final_loss = loss;
    ++res.steps;
    for (auto& [st, y] : syncs)
      for (auto& [k, v] : y->step_metrics()) res.sync_metrics[k + "." + std::to_string(st)] = v;
    if (is_root) {
      JsonLine j;
      j.integer("step", step + 1).num("loss", loss).num("lr", lr).num("step_s", dt)
          .num(gpt ? "tokens_per_s" : "samples_per_s", items_per_step / dt)
          .num("compute_s", rep.compute_s).num("bubble", bubble_step)
          .num("p2p_wait_s", rep.p2p_wait_s)
          .num("dp_wait_s", sync_wait + rep.dp_wait_s)
          .integer("dp_bytes", (mesh.dp_comm->stats() - dp0).total_bytes())
          .integer("dp_step_calls", dp_step.total_calls())
          .integer("dp_step_bytes", dp_step.total_bytes())
          .num("dp_exposed_s", dp_exposed).num("dp_hidden_s", dp_hidden)
          .integer("pp_bytes", (mesh.pp_comm->stats() - pp0).total_bytes())
          .integer("peak_activation_bytes", rep.peak_activation_bytes)
          .integer("peak_dp_working_bytes", rep.peak_working_bytes)
          .integer("peak_bytes", parallel::MemoryTracker::peak_bytes());
      if (cfg.train.clip > 0) j.num("grad_norm", norm);
      for (auto& [s, y] : syncs)
        for (auto& [k, v] : y->step_metrics()) j.num(k + "." + std::to_string(s), v);
      *metrics << j.done() << "\n" << std::flush;
    }
    progress.update(step + 1, loss, items_per_step / dt, seconds_since(t_run));
    if (calibration && (step + 1) % cfg.output.calibrate_every == 0 && step + 1 < end) {
      const Calibration::Times t = calibration->run(base);
      if (is_root) {
        JsonLine j;
        j.integer("step", step + 1).integer("calib_micro_batch", calibration->micro_batch());
        for (int q = 0; q < base.size(); ++q)
          j.num("calib_layer_s_r" + std::to_string(q), t.alone[q])
              .num("calib_loaded_s_r" + std::to_string(q), t.loaded[q]);
        *metrics << j.done() << "\n" << std::flush;
      }
    }
    bool last = step + 1 == total;
    if ((cfg.train.eval_every > 0 && (step + 1) % cfg.train.eval_every == 0) || last) {
      auto [el, ea] = evaluate();
      res.eval_loss = el;
      res.eval_accuracy = ea;
      if (is_root) {
        JsonLine j;
        j.integer("step", step + 1).num("eval_loss", el);
        if (ea >= 0) j.num("eval_accuracy", ea);
        *metrics << j.done() << "\n" << std::flush;
        progress.message(detail::concat("eval at step ", step + 1, ": loss ", el,
                                        ea >= 0 ? detail::concat(", accuracy ", ea * 100, "%") : ""));
      }
    }
    if ((cfg.output.checkpoint_every > 0 && (step + 1) % cfg.output.checkpoint_every == 0) || last)
      save_checkpoint(step + 1);
  }
  progress.finish();
  res.wall_s = seconds_since(t_run);
  res.items_per_s = res.steps > 0 ? items_per_step * res.steps / steps_time : 0;
  res.dp_bytes = (mesh.dp_comm->stats() - dp0).total_bytes();
  res.pp_bytes = (mesh.pp_comm->stats() - pp0).total_bytes();
  if (!cfg.output.trace.empty()) write_trace(cfg.output.trace);
  for (auto& [s, st] : stages) {
    std::vector<parallel::NamedParam> full = syncs.at(s)->full_params();  // DP collective
    for (auto& p : full.empty() ? st->params() : full) res.params[p.name] = p.tensor.detach().clone();
  }

  // Summary (rank 0 shows its own accounting; the metrics file has per-step numbers).
  parallel::MemoryBytes mem;
  for (auto& [s, y] : syncs) {
    auto m = y->memory();
    m.optimizer += optimizers.at(s)->state_bytes();
    mem.params += m.params;
    mem.grads += m.grads;
    mem.optimizer += m.optimizer;
    mem.working += m.working;
  }
  res.memory = mem;
  const int64_t persistent = mem.total() - mem.working;
  res.peak_working_bytes = peak_working;
  res.peak_bytes = persistent + peak_transient;
  // Every rank's state (persistent + transient buffers at their concurrent peak) and peak of
  // state + activations.
  int64_t mine[2] = {persistent + peak_working, res.peak_bytes};
  std::vector<int64_t> per_rank(2 * base.size());
  base.all_gather(mine, per_rank.data(), 2, comm::DType::Int64)->wait();
  const double nsteps = std::max<int64_t>(1, res.steps);
  if (is_root) {
    JsonLine j;
    j.str("summary", "run").integer("steps", res.steps)
        .num("dp_calls_per_step", dp_steps.total_calls() / nsteps)
        .integer("dp_bytes_per_step", static_cast<long long>(dp_steps.total_bytes() / nsteps))
        .num("dp_exposed_s", dp_exposed_s).num("dp_hidden_s", dp_hidden_s)
        .num("p2p_wait_s", p2p_s).num("step_s", steps_time / nsteps);
    for (int q = 0; q < base.size(); ++q)
      j.integer("state_bytes_r" + std::to_string(q), per_rank[2 * q])
          .integer("peak_bytes_r" + std::to_string(q), per_rank[2 * q + 1]);
    *metrics << j.done() << "\n" << std::flush;
  }
  double bubble = steps_time > 0 ? std::max(0.0, 1.0 - compute_s / steps_time) : 0;
  if (is_root) {
    std::vector<std::pair<std::string, std::string>> rows = {
        {"steps", std::to_string(res.steps) + (start_step ? " (resumed at " + std::to_string(start_step) + ")" : "")},
        {"wall time", human_time(res.wall_s)},
        {"throughput", human_count(res.items_per_s) + (gpt ? " tokens/s" : " samples/s")},
        {"final train loss", std::to_string(res.final_loss)},
        {"eval loss", std::to_string(res.eval_loss)},
    };
    if (res.eval_accuracy >= 0) rows.push_back({"eval accuracy", std::to_string(res.eval_accuracy * 100) + " %"});
    rows.push_back({"idle + comm (rank 0)", std::to_string(bubble * 100) + " % of step time"});
    rows.push_back({"exposed comm (rank 0)", human_time(exposed_s) + " (dp " + human_time(dp_exposed_s) +
                                                 ", pp " + human_time(p2p_s) + ")"});
    rows.push_back({"hidden dp comm (rank 0)", human_time(dp_hidden_s)});
    std::string kinds;
    for (int k = 0; k < comm::kOpKinds; ++k)
      if (dp_steps.calls[k] && k != static_cast<int>(comm::OpKind::Recv))
        kinds += detail::concat(kinds.empty() ? "" : ", ", comm::op_name(comm::OpKind(k)), " ",
                                dp_steps.calls[k] / nsteps);
    rows.push_back({"dp collectives per step (rank 0)",
                    detail::concat(dp_steps.total_calls() / nsteps) + " calls, " +
                        human_bytes(dp_steps.total_bytes() / nsteps) + (kinds.empty() ? "" : " (" + kinds + ")")});
    if (comm::link_emulation().active())
      rows.push_back({"link", "EMULATED " + cfg.emulate.bandwidth + " " + cfg.emulate.latency});
    rows.push_back({"dp bytes sent (rank 0)", human_bytes(double(res.dp_bytes))});
    rows.push_back({"pp bytes sent (rank 0)", human_bytes(double(res.pp_bytes))});
    rows.push_back({"params/grads/optim (rank 0)",
                    human_bytes(mem.params) + " / " + human_bytes(mem.grads) + " / " + human_bytes(mem.optimizer)});
    rows.push_back({"peak activations (rank 0)", human_bytes(double(peak_act))});
    std::string state, peak;
    for (int q = 0; q < base.size(); ++q) {
      if (q) state += ", ", peak += ", ";
      state += human_bytes(double(per_rank[2 * q]));
      peak += human_bytes(double(per_rank[2 * q + 1]));
    }
    rows.push_back({"params+grads+optim per rank", state});
    rows.push_back({"peak memory per rank", peak + " (with activations)"});
    rows.push_back({"metrics", (fs::path(cfg.output.dir) / "metrics.jsonl").string()});
    rows.push_back({"checkpoint", (fs::path(cfg.output.dir) / "checkpoint").string()});
    if (!cfg.output.trace.empty()) rows.push_back({"timeline", cfg.output.trace});
    if (cfg.output.progress) std::fprintf(stderr, "\n%s", summary_table("loom run summary", rows).c_str());
  }
  return res;
}

Trainer::Trainer(const config::Config& cfg, comm::Backend& base)
    : impl_(std::make_unique<Impl>(cfg, base)) {
  impl_->setup();
}
Trainer::~Trainer() = default;
TrainResult Trainer::run(int64_t stop_after) { return impl_->run(stop_after); }

}  // namespace loom::train
