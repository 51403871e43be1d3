// loom launch: a small torchrun. Starts N ranks of any command on this machine with RANK,
// LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set and a c10d store to meet at; the tests
// run their multi-rank binaries through it for the gloo backend.
#include <iostream>

#include "loom/cli/args.h"
#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/launch/launcher.h"

namespace loom::cli {
namespace {

const char* kLaunchHelp = R"(usage: loom launch --nproc N [--comm gloo|nccl|mpi] [--] COMMAND [ARGS ...]

Starts N ranks of COMMAND on this machine, each with the torchrun environment (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and LOOM_COMM set to the
backend (default gloo), and a c10d store hosted by this process for them to meet at. When a
rank fails, the others are stopped and the exit code is that rank's (128 + signal if killed).

examples:
  loom launch --nproc 4 -- build/bin/loom train --config configs/gpt-fortunes.toml
  loom launch --nproc 2 build/tests/comm/comm_test
)";

}  // namespace

int launch_command(const std::vector<std::string>& args) {
  // Flags end at "--" or at the first word that is neither a flag nor a flag's value.
  std::vector<std::string> own, command;
  size_t i = 0;
  while (i < args.size() && args[i] != "--" && args[i].rfind("--", 0) == 0) {
    own.push_back(args[i]);
    const bool takes_value = args[i] != "--help" && args[i].find('=') == std::string::npos;
    if (takes_value && i + 1 < args.size()) own.push_back(args[++i]);
    ++i;
  }
  if (i < args.size() && args[i] == "--") ++i;
  command.assign(args.begin() + static_cast<long>(i), args.end());
  Args a = take_flags(own, {"nproc", "comm"}, {"help"});
  if (a.flags.count("help")) {
    std::cout << kLaunchHelp;
    return 0;
  }
  if (!a.rest.empty()) LOOM_USAGE("unknown flag '", a.rest.front(), "' for loom launch; see loom launch --help");
  if (!a.flags.count("nproc")) LOOM_USAGE("loom launch needs --nproc N");
  if (command.empty()) LOOM_USAGE("loom launch needs a command to run after its flags");
  launch::Options o;
  o.nproc = to_int("nproc", a.flags.at("nproc"), 1, 4096);
  if (a.flags.count("comm")) o.comm = comm::parse_backend(a.flags.at("comm"));
  o.command = command;
  return launch::run_local(o);
}

}  // namespace loom::cli
