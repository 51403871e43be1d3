#include "loom/train/preemption.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "loom/comm/backend.h"

namespace loom::train {
namespace {

volatile sig_atomic_t g_stop = 0;
bool g_installed = false;
// The launcher that started this rank through mpirun (LOOM_LAUNCHER_PID): a pidfd, which
// stays bound to that process even if its pid is reused, else the pid itself.
int g_launcher_fd = -1;
pid_t g_launcher_pid = 0;

void watch_launcher() {
  const char* v = std::getenv("LOOM_LAUNCHER_PID");
  if (!v || !*v || g_launcher_pid != 0) return;
  g_launcher_pid = static_cast<pid_t>(std::atol(v));
  if (g_launcher_pid <= 1) {
    g_launcher_pid = 0;
    return;
  }
#ifdef SYS_pidfd_open
  g_launcher_fd = static_cast<int>(::syscall(SYS_pidfd_open, g_launcher_pid, 0));
#endif
}

bool launcher_gone() {
  if (g_launcher_pid == 0) return false;
  if (g_launcher_fd >= 0) {
    pollfd p{g_launcher_fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;  // readable once the process has ended
  }
  return ::kill(g_launcher_pid, 0) != 0 && errno == ESRCH;
}

void on_stop_signal(int sig) {
  if (g_stop == SIGINT && sig == SIGINT) _exit(128 + SIGINT);  // Ctrl-C twice: at once
  if (g_stop == 0 || sig > g_stop) g_stop = sig;
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Takes the stop signals sent to the process, one by one, for as long as the process lives.
void watch_signals() {
  const sigset_t set = stop_signals();
  for (;;) {
    const int sig = ::sigwaitinfo(&set, nullptr);
    if (sig > 0) on_stop_signal(sig);
  }
}

}  // namespace

void install_stop_handlers() {
  // The signals are blocked in this thread and in every thread started after it (the
  // communication library's, the compute pools), and taken by one thread that waits for them:
  // a signal then never interrupts the computation. Delivered to a computing thread, mpirun's
  // SIGTERM (after another rank called MPI_Abort) was followed, 1 ms later, by a corrupted heap
  // on the surviving rank in some runs (docs/reliability.md).
  static const bool watching = [] {
    const sigset_t set = stop_signals();
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(watch_signals).detach();
    return true;
  }();
  (void)watching;
  // For a thread that was started earlier with the signals open, the handler only records.
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // blocking calls in the communication libraries go on
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  g_installed = true;
  watch_launcher();
}

bool stop_handlers_installed() {
  return g_installed;
}

int local_stop_signal() {
  return g_stop;
}

int agree_stop_signal(comm::Backend& world) {
  // A launcher that died (SIGKILL, the OOM killer) cannot pass a stop on: its ranks stop as
  // if it had. (Under mpirun, a SIGTERM to mpirun gives them 1 s before SIGKILL.)
  if (g_stop == 0 && launcher_gone()) g_stop = SIGTERM;
  int sig = g_stop;
  world.all_reduce(&sig, 1, comm::DType::Int32, comm::ReduceOp::Max)->wait();
  return sig;
}

const char* stop_signal_name(int sig) {
  if (sig == SIGTERM) return "SIGTERM";
  if (sig == SIGINT) return "SIGINT";
  static thread_local char buf[24];
  std::snprintf(buf, sizeof buf, "signal %d", sig);
  return buf;
}

}  // namespace loom::train
