// loom train: parse the configuration, check it, and either start the ranks (--nproc outside
// a launcher: mpirun for the mpi backend, the built-in launcher for gloo and nccl) or train on
// the ranks a launcher (mpirun, srun, torchrun, loom) started.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/cli/config_reference.h"
#include "loom/comm/world.h"
#include "loom/launch/launcher.h"
#include "loom/common/error.h"
#include "loom/config/config.h"
#include "loom/flags/flags.h"
#include "loom/train/checkpoint.h"
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

volatile sig_atomic_t g_signals = 0;
volatile sig_atomic_t g_signal = 0;
void remember_signal(int sig) {
  g_signal = sig;
  g_signals = g_signals + 1;
}

// The processes whose parent is `pid` (mpirun's: the ranks on this machine).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> kids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    FILE* f = std::fopen((e.path() / "stat").c_str(), "r");
    if (!f) continue;
    int self = 0, parent = 0;
    char state = 0;
    // pid (comm) state ppid: comm may hold spaces, so scan past its closing parenthesis.
    char buf[512];
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char* close = std::strrchr(buf, ')');
    if (close && std::sscanf(buf, "%d", &self) == 1 &&
        std::sscanf(close + 1, " %c %d", &state, &parent) == 2 && parent == pid)
      kids.push_back(self);
  }
  return kids;
}

// One run of mpirun (forked and waited, so that a failure can be restarted). SIGTERM/SIGINT
// to this process go straight to the ranks, once: signalled, mpirun itself would SIGKILL them
// after odls_base_sigkill_timeout and sleep through all of it. A second signal kills them, as
// does the end of `stop_grace_s`.
launch::Outcome run_mpirun(int nproc, const std::string& self, const std::vector<std::string>& args,
                           int attempt, int stop_grace_s) {
  const std::string count = std::to_string(attempt);
  setenv("LOOM_RESTART_COUNT", count.c_str(), 1);
  setenv("OMP_NUM_THREADS", "1", 0);
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(nproc), "--oversubscribe",
                                  "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS",
                                  "-x", "LOOM_RESTART_COUNT"};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.push_back(std::filesystem::read_symlink(self).string());  // mpirun must not run itself
  cmd.push_back("train");
  for (const auto& a : args) cmd.push_back(a);
  std::vector<char*> argv;
  for (auto& c : cmd) argv.push_back(c.data());
  argv.push_back(nullptr);
  g_signal = 0;
  g_signals = 0;
  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = remember_signal;
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(detail::concat("cannot start mpirun: fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);  // a terminal's Ctrl-C reaches the ranks once, through this process
    ::execvp("mpirun", argv.data());
    std::fprintf(stderr, "loom: error: cannot run mpirun (%s); install Open MPI with scripts/install-deps.sh\n",
                 std::strerror(errno));
    ::_exit(2);
  }
  launch::Outcome out;
  int forwarded = 0, first = 0, status = 0;
  auto kill_at = std::chrono::steady_clock::time_point::max();
  auto signal_ranks = [&](int sig) {
    for (pid_t k : children_of(pid)) ::kill(k, sig);
  };
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (g_signals > forwarded) {
      if (forwarded == 0) {
        out.stopped = true;
        first = g_signal;
        signal_ranks(g_signal == SIGINT ? SIGINT : SIGTERM);
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(stop_grace_s);
      } else {
        signal_ranks(g_signal == SIGINT ? SIGINT : SIGKILL);  // a second SIGINT: they exit
      }
      forwarded = g_signals;
    }
    if (std::chrono::steady_clock::now() >= kill_at) signal_ranks(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  out.code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  if (first && out.code != 0) out.code = 128 + first;
  out.stopped |= out.code == 128 + SIGTERM || out.code == 128 + SIGINT;
  if (out.code != 0)
    out.why = WIFSIGNALED(status) ? detail::concat("killed by signal ", WTERMSIG(status))
                                  : detail::concat("exited with code ", out.code);
  return out;
}

// Runs `once` (one attempt of the whole job) and, after a failure that is neither a usage
// error nor a preemption, again with --resume from the newest complete checkpoint, up to
// `max_restarts` times.
int run_with_restarts(const config::Config& cfg, const std::vector<std::string>& pass,
                      int max_restarts,
                      const std::function<launch::Outcome(const std::vector<std::string>&, int)>& once) {
  namespace fs = std::filesystem;
  const std::string root = (fs::path(cfg.output.dir) / "checkpoint").string();
  // Only a checkpoint this job wrote: an older run's in the same folder is no resume point.
  const auto started = fs::file_time_type::clock::now();
  std::vector<std::string> args = pass;
  for (int attempt = 0;; ++attempt) {
    const launch::Outcome o = once(args, attempt);
    if (o.code == 0 || o.code == 2 || o.stopped || attempt >= max_restarts) return o.code;
    args = pass;
    std::string from = "the start";
    try {
      std::string dir;
      train::read_manifest(root, &dir);
      if (fs::last_write_time(fs::path(dir) / "manifest.json") >= started) {
        from = fs::path(dir).filename().string();
        args.push_back("--output.resume=" + root);
      }
    } catch (const UsageError&) {  // no complete checkpoint yet
    }
    if (from == "the start" && !cfg.output.resume.empty()) from = cfg.output.resume;
    const std::string who = o.failed_rank >= 0 ? detail::concat("rank ", o.failed_rank) : "mpirun";
    std::fprintf(stderr, "loom: %s failed (%s); restart %d of %d from %s\n", who.c_str(),
                 o.why.c_str(), attempt + 1, max_restarts, from.c_str());
  }
}

// More ranks than cores still trains, slowly: one line says so.
void warn_oversubscribed(int nproc) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (cores > 0 && nproc > cores)
    std::fprintf(stderr, "loom: warning: %d ranks on %d core%s; every step will be slower\n",
                 nproc, cores, cores == 1 ? "" : "s");
}

// The backend the configuration asks for; "auto" follows the launch.
comm::BackendKind chosen_backend(const config::Config& cfg) {
  if (cfg.parallel.comm == config::CommChoice::Auto) return comm::launch_backend();
  return comm::parse_backend(config::name_of(cfg.parallel.comm));
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
  if ((a.has("max-restarts") || a.has("stop-grace")) && (!a.has("nproc") || in_ranks) &&
      problem.empty())
    problem = "--max-restarts and --stop-grace need --nproc N outside a launcher (loom starts "
              "and watches the ranks); drop them";
  if (!problem.empty() && !in_ranks) throw UsageError(problem);
  if (a.has("nproc") && !in_ranks) {
    int n = flags::to_int("nproc", a.get("nproc"), 1, 4096);
    const int max_restarts = flags::to_int("max-restarts", a.get("max-restarts", "0"), 0, 1000);
    const int stop_grace = flags::to_int("stop-grace", a.get("stop-grace", "300"), 1, 86400);
    config::Config cfg = load(a);
    // The output folder is made last: a bad --resume target leaves nothing behind.
    const bool resume = !cfg.output.resume.empty();
    const train::Resolved r = train::preflight(cfg, n, /*check_output=*/!resume);
    train::check_resume_target(cfg, r, n);
    if (resume) train::preflight(cfg, n);
    warn_oversubscribed(n);
    // The ranks get the same configuration flags (the = form keeps values such as "--x").
    std::vector<std::string> pass;
    if (a.has("config")) pass = {"--config", a.get("config")};
    for (const auto& item : a.items)
      if (item.from_source) pass.push_back("--" + item.spelled + "=" + item.value);
    const comm::BackendKind kind = chosen_backend(cfg);
    if (kind == comm::BackendKind::Mpi)
      return run_with_restarts(cfg, pass, max_restarts, [&](const auto& args, int attempt) {
        return run_mpirun(n, self, args, attempt, stop_grace);
      });
    return run_with_restarts(cfg, pass, max_restarts, [&](const auto& args, int attempt) {
      launch::Options lo;
      lo.nproc = n;
      lo.comm = kind;
      lo.stop_grace_s = stop_grace;
      lo.attempt = attempt;
      lo.command = {std::filesystem::read_symlink(self).string(), "train"};
      lo.command.insert(lo.command.end(), args.begin(), args.end());
      return launch::run_once(lo);
    });
  }
  // The backend comes from the configuration; if it does not parse, from the launch, so that
  // the ranks can agree below on who reports the problem.
  comm::BackendKind kind = comm::launch_backend();
  try {
    if (problem.empty()) kind = chosen_backend(load(a));
  } catch (const UsageError&) {
  }
  // A signal while the ranks meet is a stop after the first step, not a crash; installed again
  // after init in case the communication library set its own.
  train::install_stop_handlers();
  comm::init(kind, argc, argv);
  train::install_stop_handlers();
  comm::Backend& w = comm::world();
  // Every rank checks the input; the lowest rank that found a problem reports it, all exit 2.
  config::Config cfg;
  try {
    if (!problem.empty()) throw UsageError(problem);
    cfg = load(a);
    if (a.has("nproc") && flags::to_int("nproc", a.get("nproc"), 1, 4096) != w.size())
      LOOM_USAGE("--nproc ", a.get("nproc"), " but the launcher started ", w.size(),
                 " ranks; drop --nproc when launching with mpirun or torchrun");
    train::preflight(cfg, w.size(), w.rank() == 0);
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
  train::TrainResult res;
  {
    train::Trainer trainer(cfg, w);
    res = trainer.run();
  }
  if (res.stop_signal && w.rank() == 0)
    std::fprintf(stderr, "loom: stopped by %s after step %lld; checkpoint in %s; resume with --resume %s\n",
                 train::stop_signal_name(res.stop_signal), static_cast<long long>(res.stop_step),
                 res.stop_checkpoint.c_str(),
                 (std::filesystem::path(cfg.output.dir) / "checkpoint").string().c_str());
  w.barrier()->wait();
  comm::finalize();
  return res.stop_signal ? 128 + res.stop_signal : 0;
}

}  // namespace loom::cli
