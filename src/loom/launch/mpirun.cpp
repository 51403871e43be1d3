#include "loom/launch/mpirun.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "loom/common/error.h"
#include "loom/launch/mpirun_stderr.h"

namespace loom::launch {
namespace {

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

// The CPUs this process may run on (its affinity: a cgroup's or taskset's limit), at least 1.
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

std::vector<std::string> binding_options(int nproc, int cpus) {
  if (nproc > cpus) return {"--bind-to", "none"};
  return {"--use-hwthread-cpus", "--map-by", "slot:PE=" + std::to_string(cpus / nproc)};
}

Outcome run_mpirun(const Options& o) {
  const std::string count = std::to_string(o.attempt);
  setenv("LOOM_RESTART_COUNT", count.c_str(), 1);
  setenv("OMP_NUM_THREADS", "1", 0);
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  std::vector<std::string> cmd = {"mpirun",
                                  "-n",
                                  std::to_string(o.nproc),
                                  "--oversubscribe",
                                  "-x",
                                  "OMP_NUM_THREADS",
                                  "-x",
                                  "OPENBLAS_NUM_THREADS",
                                  "-x",
                                  "LOOM_RESTART_COUNT"};
  if (std::getenv("LOOM_OUTPUT_LOCKED")) cmd.insert(cmd.end(), {"-x", "LOOM_OUTPUT_LOCKED"});
  // The ranks watch this process: if it dies, they stop with a checkpoint (train/preemption.h)
  // rather than train on, orphaned. (A SIGTERM to mpirun would give them 1 s.)
  setenv("LOOM_LAUNCHER_PID", std::to_string(::getpid()).c_str(), 1);
  cmd.insert(cmd.end(), {"-x", "LOOM_LAUNCHER_PID"});
  for (std::string& b : binding_options(o.nproc, usable_cpus())) cmd.push_back(std::move(b));
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(), o.command.begin(), o.command.end());
  std::vector<char*> argv;
  for (auto& c : cmd) argv.push_back(c.data());
  argv.push_back(nullptr);
  g_signal = 0;
  g_signals = 0;
  struct sigaction sa = {}, old_int = {}, old_term = {};
  sa.sa_handler = remember_signal;
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  // mpirun's stderr (the ranks' too) comes through here: mpirun_stderr.h.
  int err_pipe[2];
  if (::pipe(err_pipe) != 0)
    throw Error(detail::concat("cannot start mpirun: pipe: ", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(detail::concat("cannot start mpirun: fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(err_pipe[1], 2);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    ::setpgid(0, 0);  // a terminal's Ctrl-C reaches the ranks once, through this process
    ::execvp("mpirun", argv.data());
    std::fprintf(
        stderr,
        "loom: error: cannot run mpirun (%s); install Open MPI with scripts/install-deps.sh\n",
        std::strerror(errno));
    ::_exit(2);
  }
  ::close(err_pipe[1]);
  MpirunStderr err([](std::string_view s) { (void)!::write(2, s.data(), s.size()); });
  // Whatever mpirun wrote so far, waiting for more at most `wait_ms`; false at the pipe's end
  // (and, when `drain`, once nothing more comes within wait_ms: a leftover process that still
  // holds the pipe does not hold this one up).
  auto pass_stderr = [&](int wait_ms, bool drain) {
    pollfd p{err_pipe[0], POLLIN, 0};
    if (::poll(&p, 1, wait_ms) <= 0) return !drain;
    char buf[4096];
    const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
    if (n > 0) err.feed(std::string_view(buf, size_t(n)));
    return n > 0 || (n < 0 && errno == EINTR);
  };
  bool open = true;  // the pipe, until mpirun's end of it closes
  Outcome out;
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
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(o.stop_grace_s);
      } else {
        signal_ranks(g_signal == SIGINT ? SIGINT : SIGKILL);  // a second SIGINT: they exit
      }
      forwarded = g_signals;
    }
    if (std::chrono::steady_clock::now() >= kill_at) signal_ranks(SIGKILL);
    if (open && !pass_stderr(20, false)) open = false;
    if (!open) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  while (open && pass_stderr(200, true)) {
  }
  ::close(err_pipe[0]);
  err.finish();
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  out.code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  if (first && out.code != 0) out.code = 128 + first;
  out.stopped |= out.code == 128 + SIGTERM || out.code == 128 + SIGINT;
  if (out.code != 0 && err.killed_rank() >= 0 && !first) {  // mpirun's banner named it
    out.failed_rank = err.killed_rank();
    out.why = detail::concat("killed by signal ", err.killed_signal(), " (",
                             strsignal(err.killed_signal()), ")");
    std::fprintf(stderr, "loom: rank %d was %s; mpirun stopped the other ranks\n", out.failed_rank,
                 out.why.c_str());
  } else if (out.code != 0) {
    out.why = WIFSIGNALED(status) ? detail::concat("killed by signal ", WTERMSIG(status))
                                  : detail::concat("exited with code ", out.code);
  }
  return out;
}

}  // namespace loom::launch
