#include "loom/launch/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loom/comm/c10d_backend.h"
#include "loom/comm/node_store.h"
#include "loom/common/error.h"
#include "loom/launch/node_watch.h"

namespace loom::launch {
namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_signals = 0;  // how many arrived
void remember_signal(int sig) {
  g_signal = sig;
  g_signals = g_signals + 1;
}

struct Rank {
  pid_t pid = -1;
  bool running = false;
};

// The environment of local rank `rank`: this process's, plus the torchrun variables.
std::vector<std::string> rank_env(const Options& o, int rank, int port) {
  const std::string n = std::to_string(o.nproc), r = std::to_string(rank);
  std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(o.node_rank * o.nproc + rank)},
      {"LOCAL_RANK", r},
      {"WORLD_SIZE", std::to_string(o.nnodes * o.nproc)},
      {"LOCAL_WORLD_SIZE", n},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", o.nnodes > 1 ? o.master_addr : "127.0.0.1"},
      {"MASTER_PORT", std::to_string(port)},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(o.attempt)},
      {"LOOM_RESTART_COUNT", std::to_string(o.attempt)},
      {"LOOM_COMM", std::string(comm::backend_name(o.comm))}};
  if (!o.job_start.empty()) set.emplace_back("LOOM_JOB_START", o.job_start);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (auto& [k, v] : set) replaced |= k == key;
    if (!replaced) env.push_back(kv);
  }
  for (auto& [k, v] : set) env.push_back(k + "=" + v);
  if (!std::getenv("OMP_NUM_THREADS")) env.push_back("OMP_NUM_THREADS=1");  // one per rank
  return env;
}

pid_t spawn(const Options& o, int rank, int port) {
  // Everything the child needs is built before fork: the store's threads run in this process.
  std::vector<std::string> env = rank_env(o, rank, port);
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    throw Error(detail::concat("cannot start rank ", rank, ": fork: ", std::strerror(errno)));
  if (pid > 0) return pid;
  // Its own process group: a terminal's Ctrl-C reaches the rank once, through the launcher.
  // If the launcher dies, the rank is told as if preempted.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(1);
  ::execvpe(argv[0], argv.data(), envp.data());
  const char* why = std::strerror(errno);
  (void)!::write(2, "loom: error: cannot run ", 24);
  (void)!::write(2, argv[0], std::strlen(argv[0]));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, why, std::strlen(why));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

constexpr const char* kExitedWithCode = "exited with code ";

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) {
    const int s = WTERMSIG(status);
    return detail::concat("killed by signal ", s, " (", ::strsignal(s), ")");
  }
  return detail::concat(kExitedWithCode, WEXITSTATUS(status));
}

// A rank that stopped on SIGTERM/SIGINT after its checkpoint (train/preemption.h).
bool preempted(int status) {
  return WIFEXITED(status) &&
         (WEXITSTATUS(status) == 128 + SIGTERM || WEXITSTATUS(status) == 128 + SIGINT);
}

int exit_code(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

// How long a node may stay silent: half the communication timeout, at most 30 s, so that a
// lost node is named before its peers' operations time out.
std::chrono::milliseconds liveness() {
  return std::min(comm::default_timeout() / 2, std::chrono::milliseconds(30000));
}

}  // namespace

Outcome run_once(const Options& o, std::shared_ptr<comm::NodeStore> store,
                 const std::string& prefix) {
  LOOM_CHECK(o.nproc >= 1 && !o.command.empty(), "launch needs ranks and a command");
  LOOM_CHECK(o.nnodes >= 1 && o.node_rank >= 0 && o.node_rank < o.nnodes, "bad node rank");
  const bool multi = o.nnodes > 1;
  std::unique_ptr<comm::StoreServer> local_store;
  std::shared_ptr<comm::NodeStore> node_store;
  std::unique_ptr<NodeWatch> watch;
  const std::string host = comm::host_name();
  int port = 0;
  if (multi) {
    // The other nodes may start later: they get the whole communication timeout to come up.
    node_store = store
                     ? std::move(store)
                     : std::make_shared<comm::NodeStore>(o.master_addr, o.master_port,
                                                         o.node_rank == 0, comm::default_timeout());
    port = node_store->port();
  } else {
    local_store = std::make_unique<comm::StoreServer>();
    port = local_store->port();
  }
  g_signal = 0;
  g_signals = 0;
  struct sigaction sa = {};
  sa.sa_handler = remember_signal;
  struct sigaction old_int = {}, old_term = {};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  std::vector<Rank> ranks(o.nproc);
  for (int r = 0; r < o.nproc; ++r) ranks[r] = {spawn(o, r, port), true};
  if (multi) {
    NodeInfo ni;
    ni.nnodes = o.nnodes;
    ni.node_rank = o.node_rank;
    ni.nproc = o.nproc;
    ni.host = host;
    ni.master = detail::concat(o.master_addr, ":", o.master_port);
    ni.liveness = liveness();
    ni.join = comm::default_timeout();
    ni.prefix = prefix;
    watch = std::make_unique<NodeWatch>(node_store, ni);
  }
  const int first_rank = o.node_rank * o.nproc;
  auto poll_at = std::chrono::steady_clock::now();
  int running = o.nproc;
  Outcome out;
  bool stopping = false;
  int forwarded = 0;  // signals passed on to the ranks
  int first = 0;      // the first of them
  auto kill_at = std::chrono::steady_clock::time_point::max();
  auto signal_all = [&](int sig) {
    for (auto& k : ranks)
      if (k.running) ::kill(k.pid, sig);
  };
  // Once: the others get `sig` (0: none), and SIGKILL if still running after `grace_s`.
  auto stop_all = [&](int sig, int grace_s) {
    stopping = true;
    if (sig) signal_all(sig);
    kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
  };

  while (running > 0) {
    // A signal to the launcher is passed on once; the ranks checkpoint and stop. A second
    // one (Ctrl-C twice) kills them.
    if (g_signals > forwarded) {
      if (forwarded == 0) {
        out.stopped = true;
        first = g_signal;
        if (!stopping)
          stop_all(g_signal == SIGINT ? SIGINT : SIGTERM, o.stop_grace_s);
        else
          signal_all(g_signal == SIGINT ? SIGINT : SIGTERM);
      } else {
        signal_all(SIGKILL);
      }
      forwarded = g_signals;
    }
    if (std::chrono::steady_clock::now() >= kill_at) signal_all(SIGKILL);
    // Another node failed or went silent: this node's ranks stop too, saying why.
    if (watch && !stopping && std::chrono::steady_clock::now() >= poll_at) {
      poll_at += std::chrono::milliseconds(100);
      if (const std::string why = watch->trouble(); !why.empty()) {
        // A rank elsewhere that exited with 2 said its bad input itself (the ranks agree on
        // who says it): this node's ranks stop without another line.
        if (!why.ends_with(detail::concat(" ", kExitedWithCode, 2)))
          std::fprintf(stderr, "loom: %s; stopping %s on %s\n", why.c_str(),
                       ranks_of(o.nproc, o.node_rank).c_str(), host.c_str());
        if (out.failed_rank < 0) out.why = why;
        stop_all(SIGTERM, o.grace_s);
      }
    }
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    int r = 0;
    while (r < o.nproc && ranks[r].pid != pid) ++r;
    if (r == o.nproc) continue;
    ranks[r].running = false;
    --running;
    const int code = exit_code(status);
    if (code == 0) continue;
    if (out.code == 0) out.code = code;
    if (stopping) continue;
    if (preempted(status)) {  // the others stop after the same step, as agreed
      out.stopped = true;
      stop_all(0, o.stop_grace_s);
      continue;
    }
    out.failed_rank = first_rank + r;
    out.why = describe_exit(status);
    // Across nodes, a rank here often fails because one elsewhere died at the same moment:
    // both are named, whichever was first.
    std::string also;
    if (watch) {
      watch->post_failure(detail::concat("rank ", first_rank + r, " on ", host,
                                         WIFSIGNALED(status) ? " was " : " ", out.why));
      also = watch->other_failures(std::chrono::seconds(1));
    }
    // Killed by SIGTERM/SIGINT before it could stop cleanly: someone wants the job stopped.
    out.stopped =
        WIFSIGNALED(status) && (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT);
    // A usage error (exit 2) was already printed by the rank in one line.
    if (code != 2) {
      const std::string others = running ? detail::concat("; stopping the other ", running,
                                                          running == 1 ? " rank" : " ranks")
                                         : "";
      const std::string on = multi ? " on " + host : "";
      const std::string after = also.empty() ? "" : " (also: " + also + ")";
      std::fprintf(stderr, "loom: rank %d%s (pid %d) %s%s%s\n", first_rank + r, on.c_str(),
                   static_cast<int>(pid),
                   (WIFSIGNALED(status) ? "was " + out.why : out.why).c_str(), after.c_str(),
                   others.c_str());
    }
    stop_all(SIGTERM, o.grace_s);
  }
  if (watch) {
    watch->finish(out.code, out.code == 2 || out.stopped);
    out.final_elsewhere = watch->final_elsewhere();
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (first && out.code != 0) out.code = 128 + first;  // as a shell reports it, even if killed
  return out;
}

}  // namespace loom::launch
