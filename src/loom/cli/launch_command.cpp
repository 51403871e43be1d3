// loom launch: a small torchrun. Starts N ranks of any command on this machine with RANK,
// LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set and a c10d store to meet at; the tests
// run their multi-rank binaries through it for the gloo backend.
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/flags/flags.h"
#include "loom/launch/launcher.h"

namespace loom::cli {
namespace {

const char* kLaunchHelp =
    R"(usage: loom launch --nproc N [--comm gloo|nccl|mpi] [--] COMMAND [ARGS ...]

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
  // Flags end at "--" or at the first word that is no flag's value: the command to run.
  flags::Spec spec{"launch", {{"nproc", "2"}, {"comm", "gloo"}}};
  spec.stop_at_word = true;
  const flags::Parsed a = flags::parse(args, spec);
  if (a.help) {
    std::cout << kLaunchHelp;
    return 0;
  }
  if (!a.has("nproc")) LOOM_USAGE("loom launch needs --nproc N");
  if (a.rest.empty()) LOOM_USAGE("loom launch needs a command to run after its flags");
  launch::Options o;
  o.nproc = flags::to_int("nproc", a.get("nproc"), 1, 4096);
  if (a.has("comm")) o.comm = comm::parse_backend(a.get("comm"));
  o.command = a.rest;
  return launch::run_local(o);
}

}  // namespace loom::cli
