// loom train: parse the configuration, check it, and either start the ranks (--nproc outside
// a launcher: mpirun for the mpi backend, the built-in launcher for gloo and nccl) or train on
// the ranks a launcher (mpirun, srun, torchrun, loom) started.
#include <unistd.h>

#include <cstring>
#include <filesystem>

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
#include "loom/train/preflight.h"
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

fields (section.name  type  default  help):
)";

// loom train's own flags; every configuration field is a flag too (config::flag_source()).
flags::Spec spec() {
  return {"train",
          {{"config", "configs/gpt-fortunes.toml"},
           {"nproc", "4"},
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

[[noreturn]] void relaunch(int nproc, const std::string& self, const std::vector<std::string>& args) {
  std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(nproc), "--oversubscribe",
                                  "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS"};
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.push_back(std::filesystem::read_symlink(self).string());  // mpirun must not run itself
  cmd.push_back("train");
  for (const auto& a : args) cmd.push_back(a);
  setenv("OMP_NUM_THREADS", "1", 0);
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  std::vector<char*> argv;
  for (auto& c : cmd) argv.push_back(c.data());
  argv.push_back(nullptr);
  ::execvp("mpirun", argv.data());
  LOOM_USAGE("cannot run mpirun (", std::strerror(errno),
             "); install Open MPI with scripts/install-deps.sh");
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
  if (a.has("nproc") && !in_ranks) {
    int n = flags::to_int("nproc", a.get("nproc"), 1, 4096);
    config::Config cfg = load(a);
    train::preflight(cfg, n);
    // The ranks get the same configuration flags (the = form keeps values such as "--x").
    std::vector<std::string> pass;
    if (a.has("config")) pass = {"--config", a.get("config")};
    for (const auto& item : a.items)
      if (item.from_source) pass.push_back("--" + item.spelled + "=" + item.value);
    const comm::BackendKind kind = chosen_backend(cfg);
    if (kind == comm::BackendKind::Mpi) relaunch(n, self, pass);
    launch::Options lo;
    lo.nproc = n;
    lo.comm = kind;
    lo.command = {std::filesystem::read_symlink(self).string(), "train"};
    lo.command.insert(lo.command.end(), pass.begin(), pass.end());
    return launch::run_local(lo);
  }
  // The backend comes from the configuration; if it does not parse, from the launch, so that
  // the ranks can agree below on who reports the problem.
  comm::BackendKind kind = comm::launch_backend();
  try {
    if (problem.empty()) kind = chosen_backend(load(a));
  } catch (const UsageError&) {
  }
  comm::init(kind, argc, argv);
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
  {
    train::Trainer trainer(cfg, w);
    trainer.run();
  }
  w.barrier()->wait();
  comm::finalize();
  return 0;
}

}  // namespace loom::cli
