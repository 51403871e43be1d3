// loom launch: a small torchrun. Starts N ranks of any command on this machine with RANK,
// LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set and a c10d store to meet at; the tests
// run their multi-rank binaries through it for the gloo backend. With --nnodes H, one launcher
// runs on each of H machines (docs/multi-host.md).
#include <netdb.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/flags/flags.h"
#include "loom/launch/job.h"

namespace loom::cli {
namespace {

const char* kLaunchHelp =
    R"(usage: loom launch --nproc N [--comm gloo|nccl|mpi] [--] COMMAND [ARGS ...]
       loom launch --nproc N --nnodes H --node-rank K --master-addr A [--master-port P]
                   [--comm gloo|nccl] [--max-restarts K] [--join-timeout S]
                   [--] COMMAND [ARGS ...]

Starts N ranks of COMMAND on this machine, each with the torchrun environment (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and LOOM_COMM set to the
backend (default gloo), and a c10d store hosted by this process for them to meet at. When a
rank fails, the others are stopped and the exit code is that rank's (128 + signal if killed).

Across H machines, run one launcher on each: node K's ranks are RANK = K * N + LOCAL_RANK of
WORLD_SIZE = H * N. Node 0's launcher hosts the store on A:P (default port 29500), which must
be an address of node 0 that every node reaches; the launchers watch one another through it,
so that a failed rank, or a node that stops answering for half the communication timeout (at
most 30 s; LOOM_COMM_TIMEOUT_S), stops every node with one line naming the rank or host.
Gloo uses the address on the route to A (GLOO_SOCKET_IFNAME=IF picks an interface instead).

--max-restarts K starts every rank again after a failure, up to K times (not after bad input,
exit 2, or a stop by SIGTERM/SIGINT); each attempt's ranks get LOOM_RESTART_COUNT and
LOOM_JOB_START, and `loom train` then goes on from the job's newest checkpoint. Across
machines every node takes part in every attempt: after a failure node 0 waits up to
--join-timeout S seconds (default 600) for every node to be ready again: a node whose link
was cut reconnects by itself; on a lost host that is back, run the same command again. Give
every node the same --max-restarts.

examples:
  loom launch --nproc 4 -- build/bin/loom train --config configs/gpt-fortunes.toml
  loom launch --nproc 2 build/tests/comm/comm_test
  loom launch --nproc 2 --nnodes 2 --node-rank 0 --master-addr 10.77.0.10 --max-restarts 3 \
    -- loom train --config configs/gpt-fortunes.toml --output.checkpoint_every 50
)";

}  // namespace

namespace {

// A command no rank could start is refused here, once, rather than by every rank after the
// start (each printed "cannot run" and the job ended with exit 127). `program` as execvp looks
// for it: a path when it has a slash, else each folder of PATH.
void check_runnable(const std::string& program) {
  auto runnable = [](const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return;
    const int err = ::access(program.c_str(), F_OK) == 0 ? EACCES : errno;
    LOOM_USAGE("cannot run '", program,
               "': ", err == EACCES ? "not an executable file" : std::strerror(err),
               "; check the command after loom launch's flags");
  }
  const char* path = std::getenv("PATH");
  std::istringstream folders(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(folders, dir, ':');)
    if (runnable(std::filesystem::path(dir.empty() ? "." : dir) / program)) return;
  LOOM_USAGE("cannot run '", program, "': no such program in PATH; check the command after loom ",
             "launch's flags");
}

// A master address no node can resolve is refused at once: c10d's store client would retry it
// until the communication timeout, printing a warning at each try.
void check_resolvable(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int err = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  if (err == EAI_NONAME || err == EAI_FAIL)  // not EAI_AGAIN: a name server may come back
    LOOM_USAGE("--master-addr '", host, "' does not resolve (", ::gai_strerror(err),
               "); give node 0's address or host name, the same on every node");
}

}  // namespace

int launch_command(const std::vector<std::string>& args) {
  // Flags end at "--" or at the first word that is no flag's value: the command to run.
  flags::Spec spec{"launch",
                   {{"nproc", "2"},
                    {"comm", "gloo"},
                    {"nnodes", "2"},
                    {"node-rank", "0"},
                    {"master-addr", "10.0.0.1"},
                    {"master-port", "29500"},
                    {"max-restarts", "3"},
                    {"join-timeout", "600"}}};
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
  check_runnable(o.command.front());
  o.nnodes = flags::to_int("nnodes", a.get("nnodes", "1"), 1, 4096);
  const bool node_flags = a.has("node-rank") || a.has("master-addr") || a.has("master-port");
  if (o.nnodes == 1 && node_flags)
    LOOM_USAGE("--node-rank, --master-addr and --master-port need --nnodes H > 1; drop them");
  if (o.nnodes > 1) {
    if (!a.has("node-rank") || !a.has("master-addr"))
      LOOM_USAGE("loom launch --nnodes ", o.nnodes,
                 " needs --node-rank K and --master-addr A (node 0's address, the same on "
                 "every node)");
    if (o.comm == comm::BackendKind::Mpi)
      LOOM_USAGE(
          "--nnodes starts c10d ranks; for --comm mpi across machines use mpirun "
          "--host (docs/multi-host.md)");
    o.node_rank = flags::to_int("node-rank", a.get("node-rank"), 0, o.nnodes - 1);
    o.master_addr = a.get("master-addr");
    check_resolvable(o.master_addr);
    o.master_port = flags::to_int("master-port", a.get("master-port", "29500"), 1, 65535);
  }
  o.max_restarts = flags::to_int("max-restarts", a.get("max-restarts", "0"), 0, 1000);
  o.join_timeout_s = flags::to_int("join-timeout", a.get("join-timeout", "600"), 1, 7 * 86400);
  if (a.has("join-timeout") && o.nnodes == 1)
    LOOM_USAGE(
        "--join-timeout is how long node 0 waits for the other nodes; it needs --nnodes "
        "H > 1");
  return launch::run_job(o);
}

}  // namespace loom::cli
