// loom train: parse the configuration, check it, and either start the ranks (--nproc outside
// a launcher: mpirun for the mpi backend, the built-in launcher for gloo and nccl) or train on
// the ranks a launcher (mpirun, srun, torchrun, loom) started.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/cli/config_reference.h"
#include "loom/comm/rank_hosts.h"
#include "loom/comm/single_copy.h"
#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/common/thread_slice.h"
#include "loom/common/wall_clock.h"
#include "loom/config/config.h"
#include "loom/flags/flags.h"
#include "loom/launch/launcher.h"
#include "loom/launch/mpirun.h"
#include "loom/launch/placement.h"
#include "loom/model/compute.h"
#include "loom/train/checkpoint.h"
#include "loom/train/memory_estimate.h"
#include "loom/train/preemption.h"
#include "loom/train/preflight.h"
#include "loom/train/resume_check.h"
#include "loom/train/trainer.h"

namespace loom::cli {
namespace {

const char* kTrainHelp = R"(usage: loom train [--config FILE] [--nproc N] [--FIELD VALUE ...]

Trains a model on the ranks a launcher started (mpirun, srun, torchrun), or, with --nproc N,
starts N ranks on this machine itself: through `mpirun` for --comm mpi (the default on CPUs),
with its own launcher and a c10d store for --comm gloo or nccl. Every configuration field can
be given as a flag (--layers 4, --model.layers 4, --seq-len 64 or --seq_len=64); flags override
the file.

examples:
  loom train --config configs/gpt-fortunes.toml --nproc 4
  loom train --config configs/gpt-fortunes.toml --nproc 4 --comm gloo
  loom train --config configs/cnn-fashion.toml --nproc 2 --steps 200 --dp-mode allreduce
  mpirun -n 4 loom train --config configs/gpt-fortunes.toml --pp 2 --schedule bfs --loops 2
  torchrun --nproc-per-node 4 --no-python loom train --config configs/gpt-fortunes.toml
  loom train --config configs/gpt-fortunes.toml --nproc 4 --resume runs/demo/checkpoint
  loom train --config configs/gpt-fortunes.toml --nproc 4 --max-restarts 2

with --nproc:
  --max-restarts K   relaunch all ranks up to K times after a rank fails, resuming from the
                     newest complete checkpoint in <output.dir>/checkpoint (default 0)
  --min-nproc M      each restart runs on fewer ranks (the next world size down that the
                     configuration allows, dp shrinking, not below M); the checkpoint is
                     resharded to the new layout (not with dp-mode slim)
  --stop-grace S     after SIGTERM/SIGINT, seconds the ranks get to finish the step and write
                     a checkpoint before they are killed (default 300)

SIGTERM or SIGINT (to the launcher or to any rank) stops every rank after the same step with
a checkpoint; the exit code is then 143 (SIGTERM) or 130 (SIGINT). A second SIGINT stops at once.

fields (section.name  type  default  help):
)";

// loom train's own flags; every configuration field is a flag too (config::flag_source()).
flags::Spec spec() {
  return {"train",
          {{"config", "configs/gpt-fortunes.toml"},
           {"nproc", "4"},
           {"max-restarts", "1"},
           {"min-nproc", "2"},
           {"stop-grace", "300"},
           // internal: the configuration reference as Markdown (docs/guide/configuration.md)
           {"help-markdown", "", true}},
          &config::flag_source()};
}

config::Config load(const flags::Parsed& a) {
  config::Config cfg;
  if (a.has("config")) cfg = config::load_file(a.get("config"));
  for (const auto& item : a.items)
    if (item.from_source) config::set_flag(cfg, item.name, item.value, item.spelled);
  return cfg;
}

void print_help() {
  std::cout << kTrainHelp;
  for (const auto& f : config::fields())
    std::printf("  %-28s %-7s %-12s %s\n", (f.section + "." + f.name).c_str(), f.type.c_str(),
                f.default_value.empty() ? "\"\"" : f.default_value.c_str(), f.help.c_str());
}

// The largest world size below `n`, not below `min`, that the configuration can train on
// (pp fixed, dp = world / pp); n when there is none.
int smaller_world(const config::Config& cfg, int n, int min) {
  for (int w = n - 1; w >= min; --w) {
    config::Config c = cfg;
    c.parallel.dp = 0;  // world / pp
    try {
      train::preflight(c, w, /*check_output=*/false);
      return w;
    } catch (const UsageError&) {
    }
  }
  return n;
}

// Runs `once` (one attempt of the whole job on some number of ranks) and, after a failure
// that is neither a usage error nor a preemption, again with --resume from the newest
// complete checkpoint, up to `max_restarts` times; with min_nproc > 0 each restart on fewer
// ranks (smaller_world).
int run_with_restarts(
    const config::Config& cfg, const std::vector<std::string>& pass, int nproc, int max_restarts,
    int min_nproc,
    const std::function<launch::Outcome(const std::vector<std::string>&, int, int)>& once) {
  const std::string root = (std::filesystem::path(cfg.output.dir) / "checkpoint").string();
  const double started = epoch_seconds();
  std::vector<std::string> args = pass;
  int n = nproc;
  for (int attempt = 0;; ++attempt) {
    const launch::Outcome o = once(args, attempt, n);
    if (o.code == 0 || o.code == 2 || o.stopped || attempt >= max_restarts) return o.code;
    const int before = n;
    if (min_nproc > 0) n = smaller_world(cfg, n, min_nproc);
    args = pass;
    if (n != nproc) args.push_back("--parallel.dp=0");  // world / (pp * tp)
    std::string from = train::job_checkpoint(cfg, started);
    if (!from.empty()) {
      args.push_back("--output.resume=" + root);
    } else {
      // As the job began (afresh, or from the checkpoint it resumed): the folder holds the
      // failed attempt's output, which may go (a checkpoint of the folder's own stays).
      from = cfg.output.resume.empty() ? "the start" : cfg.output.resume;
      args.push_back("--output.overwrite=true");
    }
    const std::string who = o.failed_rank >= 0 ? detail::concat("rank ", o.failed_rank) : "mpirun";
    const std::string where =
        n != before ? detail::concat(" on ", n, " ranks (was ", before, ")") : std::string();
    std::fprintf(stderr, "loom: %s failed (%s); restart %d of %d from %s%s\n", who.c_str(),
                 o.why.c_str(), attempt + 1, max_restarts, from.c_str(), where.c_str());
  }
}

// More ranks (or their compute threads) than cores still trains, slowly: one line says so.
void warn_oversubscribed(int nproc, int64_t threads) {
  const int cores = usable_cores();
  if (nproc * threads <= cores) return;
  const std::string each =
      threads > 1 ? detail::concat(" of ", threads, " compute threads (train.threads)") : "";
  std::fprintf(stderr, "loom: warning: %d rank%s%s on %d core%s; every step will be slower\n",
               nproc, nproc == 1 ? "" : "s", each.c_str(), cores, cores == 1 ? "" : "s");
}

int local_world_size(int nproc) {
  if (const char* v = std::getenv("LOCAL_WORLD_SIZE"); v && *v) return std::atoi(v);
  return nproc;
}

// The backend the configuration asks for; "auto" follows the launch, and on GPUs is NCCL
// unless ranks share a GPU (NCCL refuses that): then Gloo, through host memory. `local_ranks`:
// the ranks on this machine.
comm::BackendKind chosen_backend(const config::Config& cfg, int local_ranks) {
  const bool gpu = cfg.train.device == config::Device::Cuda;
  const bool shared = gpu && model::gpu_shared(local_ranks);
  if (cfg.parallel.comm == config::CommChoice::Nccl && shared)
    LOOM_USAGE(local_ranks, " ranks on ", torch::cuda::device_count(),
               " GPU(s): NCCL cannot put two ranks on one GPU; use --comm gloo (through host "
               "memory), or fewer ranks");
  if (cfg.parallel.comm != config::CommChoice::Auto)
    return comm::parse_backend(config::name_of(cfg.parallel.comm));
  const bool several = local_ranks > 1 || comm::launched_by_env();
  if (gpu && several && !comm::launched_by_mpi() && !std::getenv("LOOM_COMM"))
    return shared ? comm::BackendKind::Gloo : comm::BackendKind::Nccl;
  return comm::launch_backend();
}

}  // namespace

int train_command(const std::vector<std::string>& args, const std::string& self, int* argc,
                  char*** argv) {
  // Under a launcher every rank sees the same bad flag; they agree below on one to report it.
  const bool in_ranks = comm::launched_by_mpi() || comm::launched_by_env();
  flags::Parsed a;
  std::string problem;
  try {
    a = flags::parse(args, spec());
  } catch (const UsageError& e) {
    if (!in_ranks) throw;
    problem = e.what();
  }
  if (a.has("help-markdown")) {
    print_config_markdown(std::cout);
    return 0;
  }
  if (a.help) {
    print_help();
    return 0;
  }
  if ((a.has("max-restarts") || a.has("stop-grace") || a.has("min-nproc")) &&
      (!a.has("nproc") || in_ranks) && problem.empty())
    problem =
        "--max-restarts, --min-nproc and --stop-grace need --nproc N outside a launcher (loom "
        "starts and watches the ranks); drop them";
  if (!problem.empty() && !in_ranks) throw UsageError(problem);
  if (a.has("nproc") && !in_ranks) {
    int n = flags::to_int("nproc", a.get("nproc"), 1, 4096);
    const int max_restarts = flags::to_int("max-restarts", a.get("max-restarts", "0"), 0, 1000);
    const int stop_grace = flags::to_int("stop-grace", a.get("stop-grace", "300"), 1, 86400);
    const int min_nproc =
        a.has("min-nproc") ? flags::to_int("min-nproc", a.get("min-nproc"), 1, n) : 0;
    config::Config cfg = load(a);
    const auto mode = cfg.parallel.dp_mode;
    if (min_nproc > 0 && config::per_replica(mode))
      LOOM_USAGE("--min-nproc restarts on fewer replicas, which dp-mode ", mode,
                 " cannot resume (each replica keeps a model of its own); drop --min-nproc or use "
                 "another dp-mode");
    comm::default_timeout();  // LOOM_COMM_TIMEOUT_S, read by every rank: refused once here
    // The output folder is made last: bad input leaves nothing behind.
    const train::Resolved r = train::preflight(cfg, n, /*check_output=*/false);
    train::check_resume_target(cfg, r, n);
    train::check_memory(cfg, r, n);
    train::prepare_output_dir(cfg.output);
    warn_oversubscribed(n, cfg.train.threads);
    const comm::BackendKind kind = chosen_backend(cfg, n);
    if (kind == comm::BackendKind::Mpi && local_world_size(n) > 1)
      if (const std::string why = comm::single_copy_problem(); !why.empty())
        std::fprintf(stderr,
                     "loom: warning: Open MPI cannot copy messages between the ranks in one step: "
                     "%s (loom doctor)\n",
                     why.c_str());
    // The ranks get the same configuration flags (the = form keeps values such as "--x").
    std::vector<std::string> pass;
    if (a.has("config")) pass = {"--config", a.get("config")};
    for (const auto& item : a.items)
      if (item.from_source) pass.push_back("--" + item.spelled + "=" + item.value);
    return run_with_restarts(
        cfg, pass, n, max_restarts, min_nproc, [&](const auto& args, int attempt, int ranks) {
          launch::Options lo;
          lo.nproc = ranks;
          lo.comm = kind;
          lo.stop_grace_s = stop_grace;
          lo.attempt = attempt;
          // The binary itself: mpirun must not find this name on PATH and run itself.
          lo.command = {std::filesystem::read_symlink(self).string(), "train"};
          lo.command.insert(lo.command.end(), args.begin(), args.end());
          return kind == comm::BackendKind::Mpi ? launch::run_mpirun(lo) : launch::run_once(lo);
        });
  }
  // The backend comes from the configuration; if it does not parse, from the launch, so that
  // the ranks can agree below on who reports the problem.
  comm::BackendKind kind = comm::launch_backend();
  try {
    if (problem.empty()) {
      const config::Config c = load(a);
      kind = chosen_backend(c, local_world_size(1));
      // NCCL's groups start on the current GPU: the rank's own, before they are made.
      model::select_device(c.train.device, model::local_rank());
    }
  } catch (const UsageError&) {  // reported below, once the ranks can agree who says it
  }
  // A signal while the ranks meet is a stop after the first step, not a crash; installed again
  // after init in case the communication library set its own.
  train::install_stop_handlers();
  comm::init(kind, argc, argv);
  train::install_stop_handlers();
  comm::Backend& w = comm::world();
  // Every rank checks the input; the lowest rank that found a problem reports it, all exit 2.
  config::Config cfg;
  train::Resolved mesh;
  std::string restart_from;  // where a restarted attempt goes on from ("" when no restart)
  try {
    if (!problem.empty()) throw UsageError(problem);
    cfg = load(a);
    // A restarted attempt of a job across machines (loom launch --max-restarts).
    restart_from = train::resume_after_restart(cfg);
    if (a.has("nproc") && flags::to_int("nproc", a.get("nproc"), 1, 4096) != w.size())
      LOOM_USAGE("--nproc ", a.get("nproc"), " but the launcher started ", w.size(),
                 " ranks; drop --nproc when launching with mpirun or torchrun");
    // A lone process (`loom train` without --nproc) meets the memory check of the launcher
    // path too: a model that cannot fit was built until the OOM killer ended it, in silence.
    // (It runs before the output folder is touched, so --overwrite keeps the old run.)
    mesh = train::preflight(cfg, w.size(), /*check_output=*/false);
    if (w.size() == 1) train::check_memory(cfg, mesh, 1);
    if (w.rank() == 0) train::prepare_output_dir(cfg.output);
    if (w.size() == 1) warn_oversubscribed(1, cfg.train.threads);
  } catch (const UsageError& e) {
    problem = e.what();
  }
  int bad = problem.empty() ? w.size() : w.rank();
  w.all_reduce(&bad, 1, comm::DType::Int32, comm::ReduceOp::Min)->wait();
  if (bad < w.size()) {
    if (bad == w.rank()) std::fprintf(stderr, "loom: error: %s\n", problem.c_str());
    comm::finalize();
    return 2;
  }
  // A restarted attempt goes on from the job's checkpoint when any rank found one (every rank
  // passes the same --resume otherwise, so only a restart's choice can differ between hosts).
  if (w.size() > 1) {
    int32_t own = train::resumes_own_folder(cfg.output) ? 1 : 0;
    w.all_reduce(&own, 1, comm::DType::Int32, comm::ReduceOp::Max)->wait();
    if (own && !train::resumes_own_folder(cfg.output)) {
      train::resume_with_the_others(cfg);
      restart_from = "the checkpoint other hosts hold";
    }
  }
  if (!restart_from.empty() && w.rank() == 0)
    std::fprintf(stderr, "loom: restart %s: going on from %s\n", std::getenv("LOOM_RESTART_COUNT"),
                 restart_from.c_str());
  // Across hosts, rank 0 says which rank sits where (one line; none on a single host).
  if (w.size() > 1) {
    const auto hosts = launch::gather_hosts(w);
    comm::set_rank_hosts(hosts);  // failures name the hosts involved
    const std::string line =
        launch::placement_line(hosts, mesh.dp, mesh.pp, mesh.tp, cfg.parallel.placement);
    if (w.rank() == 0 && !line.empty()) std::fprintf(stderr, "loom: %s\n", line.c_str());
  }
  train::TrainResult res;
  {
    train::Trainer trainer(cfg, w);
    res = trainer.run();
  }
  if (res.stop_signal && w.rank() == 0)
    std::fprintf(stderr,
                 "loom: stopped by %s after step %lld; checkpoint in %s; resume with --resume %s\n",
                 train::stop_signal_name(res.stop_signal), static_cast<long long>(res.stop_step),
                 res.stop_checkpoint.c_str(),
                 (std::filesystem::path(cfg.output.dir) / "checkpoint").string().c_str());
  w.barrier()->wait();
  comm::finalize();
  return res.stop_signal ? 128 + res.stop_signal : 0;
}

}  // namespace loom::cli
